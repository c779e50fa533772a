// `statetrack eval CHECKPOINT`: accuracy of a trained model at other test lengths, or with
// --export-word its learned per-token transitions on one word as statetrack.lrnn/1.
#include <fmt/format.h>

#include <memory>

#include "command.hpp"
#include "statetrack/automata/error.hpp"
#include "statetrack/automata/files.hpp"
#include "statetrack/gpu/export.hpp"
#include "statetrack/gpu/trainer.hpp"
#include "statetrack/lrnn/format.hpp"

namespace statetrack::cli {

namespace {

struct EvalArgs {
    std::string checkpoint, test_len = "40:256", device = "cpu";
    std::string export_word, output;
    int cuda_device = 0;
    std::size_t words = 16;
    bool json = false, per_length = false, exporting = false;
};

void run_export(const EvalArgs& a) {
    using namespace gpu;
    if (a.output.empty()) throw InputError("argument", "--output", "--export-word needs -o MODEL.json");
    const Checkpoint c = read_checkpoint(a.checkpoint);
    const auto word = automata::parse_word(c.task.dfa, a.export_word, "--export-word");
    const lrnn::Network net = export_transitions(c, word, a.checkpoint);
    write_file_atomically(a.output, lrnn::write_network_json(net));
    const ModelConfig& m = c.options.model;
    if (a.json) {
        nlohmann::json layers = nlohmann::json::array();
        for (std::size_t l = 0; l < m.layers; ++l)
            for (std::size_t h = 0; h < m.heads; ++h)
                layers.push_back({{"lrnn_layer", export_layer_index(c, l, h)}, {"layer", l}, {"head", h}, {"dim", m.head_dim() * m.head_dim()}});
        print_json({{"checkpoint", a.checkpoint}, {"word", automata::format_word(c.task.dfa, word)}, {"positions", word.size()},
                    {"model", config_to_json(m)}, {"output", a.output}, {"layers", layers}});
        return;
    }
    fmt::print("exported {} positions of {} ({} eig [{}]) to {}: lrnn layer l * {} + h is layer l, head h "
               "(dim {} = head_dim^2, the matrix state row-major); letter t<i> is position i\n",
               word.size(), a.checkpoint, model_name(m), to_string(m.eig), a.output, m.heads, m.head_dim() * m.head_dim());
}

void run_eval(const EvalArgs& a) {
    using namespace gpu;
    if (a.exporting) return run_export(a);
    if (!a.output.empty()) throw InputError("argument", "--output", "-o is only for --export-word");
    const LengthRange lengths = parse_length_range(a.test_len, "--test-len");
    if (a.words < 1 || a.words > max_eval_words)
        throw InputError("argument", "--eval-words", fmt::format("must be 1..{}", max_eval_words));
    const Device device = parse_device(a.device);
    const Checkpoint c = read_checkpoint(a.checkpoint);
    const Evaluation e = evaluate(c, lengths, a.words, device, a.cuda_device);
    if (a.json) {
        nlohmann::json out = evaluation_to_json(e, true);
        out["checkpoint"] = a.checkpoint;
        out["step"] = c.step;
        out["task"] = c.task.spec;
        out["model"] = config_to_json(c.options.model);
        out["device"] = a.device;
        print_json(out);
        return;
    }
    fmt::print("checkpoint: {} (step {}, task {}, model {} eig [{}])\n", a.checkpoint, c.step, c.task.spec,
               model_name(c.options.model), to_string(c.options.model.eig));
    fmt::print("lengths {}..{}, {} words each: accuracy {:.4f} (worst length {:.4f}), chance {:.4f}, scaled accuracy {:.4f}\n",
               lengths.min, lengths.max, a.words, e.accuracy, e.min_accuracy, e.chance, e.scaled_accuracy);
    if (a.per_length)
        for (const auto& l : e.lengths) fmt::print("  length {:5}: {:.4f}\n", l.length, l.accuracy);
}

}  // namespace

void add_eval(CLI::App& app) {
    auto a = std::make_shared<EvalArgs>();
    CLI::App* cmd = app.add_subcommand("eval", "Evaluate a training checkpoint at test lengths");
    cmd->add_option("checkpoint", a->checkpoint, "A checkpoint.bin written by `statetrack train`")->required();
    cmd->add_option("--test-len", a->test_len, "Test word lengths MIN:MAX")->capture_default_str();
    cmd->add_option("--eval-words", a->words, "Test words per length")->capture_default_str();
    cmd->add_option("--device", a->device, "cpu or cuda (either reads a checkpoint from either)")->capture_default_str();
    cmd->add_option("--cuda-device", a->cuda_device, "Which GPU (--device cuda)")->capture_default_str();
    cmd->add_flag("--per-length", a->per_length, "Print the accuracy of every length");
    cmd->add_option("--export-word", a->export_word,
                    "Instead of evaluating: export the learned transitions on this word (letters separated by spaces) "
                    "as statetrack.lrnn/1, one layer per layer and head, one input letter per position");
    cmd->add_option("-o,--output", a->output, "Where --export-word writes the model (atomically)");
    cmd->add_flag("--json", a->json, "Print JSON on stdout (always per length)");
    cmd->callback([a, cmd] {
        a->exporting = cmd->count("--export-word") > 0;  // an empty word is refused, not ignored
        run_eval(*a);
    });
}

}  // namespace statetrack::cli
