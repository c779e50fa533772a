// `statetrack train`: a learnability run on a task from a DFA (docs/training.md).
#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "command.hpp"
#include "statetrack/automata/error.hpp"
#include "statetrack/automata/formats.hpp"
#include "statetrack/gpu/trainer.hpp"

namespace statetrack::cli {

namespace {

struct TrainArgs {
    std::string task, model = "deltanet", eig = "-1,1", train_len = "3:40", test_len = "40:256";
    std::string label = "final", target = "accept", device = "cpu", precision = "fp32", matmul = "tf32", out;
    std::string cuda_recurrences = "chunked", cuda_words = "packed";
    int cuda_device = 0;
    std::size_t layers = 1, d_model = 16, heads = 1, batch = 32, steps = 1000, eval_every = 0, eval_words = 16;
    std::size_t mlp = 0, stop_at = 0;
    double lr = 3e-3, clip = 1.0, weight_decay = 0.1;
    std::uint64_t seed = 1;
    bool resume = false, json = false, quiet = false;
};

void run_train(const TrainArgs& a) {
    using namespace gpu;
    TrainOptions o;
    o.device = parse_device(a.device);
    o.matmul = parse_matmul_precision(a.matmul);
    o.cuda_chunked = parse_cuda_recurrences(a.cuda_recurrences);
    o.cuda_packed = parse_cuda_words(a.cuda_words);
    o.cuda_device = a.cuda_device;
    parse_model_name(a.model, o.model);
    o.model.eig = parse_eig_range(a.eig);
    o.model.layers = a.layers, o.model.d_model = a.d_model, o.model.heads = a.heads, o.model.mlp_hidden = a.mlp;
    o.batch = a.batch, o.steps = a.steps, o.seed = a.seed;
    o.adamw.lr = a.lr, o.adamw.clip = a.clip, o.adamw.weight_decay = a.weight_decay;
    o.train_len = parse_length_range(a.train_len, "--train-len");
    o.test_len = parse_length_range(a.test_len, "--test-len");
    o.eval_every = a.eval_every, o.eval_words = a.eval_words;
    o.precision = parse_precision(a.precision);
    o.out_dir = a.out, o.resume = a.resume, o.progress = !a.quiet, o.stop_at = a.stop_at;
    Task task;
    task.label = parse_label_mode(a.label);
    task.target = parse_target(a.target);
    task.spec = a.task;
    task.dfa = automata::load_dfa(a.task);
    const nlohmann::json summary = train(task, o, &std::cerr);
    if (a.json) {
        print_json(summary);
        return;
    }
    const auto& f = summary["final"];
    fmt::print("task:      {} ({} states, {} letters, label {}, target {})\n", a.task, task.dfa.num_states(),
               task.dfa.num_letters(), a.label, a.target);
    fmt::print("model:     {} eig [{}], {} layer(s), d_model {}, {} head(s), {} parameters\n", model_name(o.model), a.eig,
               a.layers, a.d_model, a.heads, summary["parameters"].get<std::size_t>());
    fmt::print("trained:   {} steps in {:.1f} s ({:.0f} tokens/s) on {}\n", a.steps, summary["wall_s"].get<double>(),
               summary["tokens_per_s"].get<double>(),
               summary.contains("gpu") ? summary["gpu"].get<std::string>() : std::string("the CPU"));
    fmt::print("test:      lengths {}..{}: accuracy {:.4f} (worst length {:.4f}), scaled accuracy {:.4f}\n", o.test_len.min,
               o.test_len.max, f["accuracy"].get<double>(), f["min_accuracy"].get<double>(), f["scaled_accuracy"].get<double>());
    if (summary["spectra"].is_array())
        for (const auto& s : summary["spectra"])
            fmt::print("spectrum:  layer {} head {}: eigenvalues in [{:.3f}, {:.3f}], {:.1f}% negative\n",
                       s["layer"].get<std::size_t>(), s["head"].get<std::size_t>(), s["min"].get<double>(),
                       s["max"].get<double>(), 100 * s["fraction_negative"].get<double>());
    fmt::print("outputs:   {}/summary.json, metrics.jsonl, checkpoint.bin\n", a.out);
}

}  // namespace

void add_train(CLI::App& app) {
    auto a = std::make_shared<TrainArgs>();
    CLI::App* cmd = app.add_subcommand("train", "Train a model on a task from a DFA (learnability experiment)");
    cmd->add_option("--task", a->task, "DFA: FILE.json, FILE.att or zoo:NAME[:ARGS]")->required();
    cmd->add_option("--model", a->model, "deltanet | deltaproduct:N | mamba | lstm")->capture_default_str();
    cmd->add_option("--eig", a->eig, "Eigenvalue range of the transitions: 0,1 or -1,1")->capture_default_str();
    cmd->add_option("--layers", a->layers, "Number of blocks")->capture_default_str();
    cmd->add_option("--d-model", a->d_model, "Model width")->capture_default_str();
    cmd->add_option("--heads", a->heads, "Heads (must divide d_model)")->capture_default_str();
    cmd->add_option("--mlp", a->mlp, "SwiGLU hidden width (0: 2 * d_model)")->capture_default_str();
    cmd->add_option("--batch", a->batch, "Words per training step")->capture_default_str();
    cmd->add_option("--steps", a->steps, "Optimizer steps")->capture_default_str();
    cmd->add_option("--lr", a->lr, "Peak learning rate (cosine schedule, 10% warm-up, down to 1e-6)")->capture_default_str();
    cmd->add_option("--weight-decay", a->weight_decay, "AdamW weight decay")->capture_default_str();
    cmd->add_option("--clip", a->clip, "Clip the global gradient norm (0: off)")->capture_default_str();
    cmd->add_option("--seed", a->seed, "Seed of the weights and the data")->capture_default_str();
    cmd->add_option("--train-len", a->train_len, "Training word lengths MIN:MAX")->capture_default_str();
    cmd->add_option("--test-len", a->test_len, "Test word lengths MIN:MAX")->capture_default_str();
    cmd->add_option("--label", a->label, "final (label at the last position) or every (at every position)")->capture_default_str();
    cmd->add_option("--target", a->target, "accept (2 classes) or state (one class per DFA state)")->capture_default_str();
    cmd->add_option("--device", a->device, "cpu or cuda")->capture_default_str();
    cmd->add_option("--cuda-device", a->cuda_device, "Which GPU (--device cuda)")->capture_default_str();
    cmd->add_option("--matmul", a->matmul, "CUDA matrix products: tf32 (tensor cores), bf16 (the MLP and the delta rules' projections in bf16, the rest tf32) or fp32 (exact)")->capture_default_str();
    cmd->add_option("--cuda-recurrences", a->cuda_recurrences, "CUDA deltanet, and deltaproduct:2 to :4 with up to 4 conv taps, at head_dim 32: chunked (16 steps at a time, the state's products on the FP64 tensor cores, on GPUs fast at FP64) or steps (token by token, as every other shape)")->capture_default_str();
    cmd->add_option("--cuda-words", a->cuda_words, "CUDA training steps (head_dim 32, or 16, 8, 4 with heads a multiple of 2, 4, 8): packed (the words' rows only, one after the other) or padded (every word T rows long)")->capture_default_str();
    cmd->add_option("--precision", a->precision, "Arithmetic: fp32 or fp64 (fp64: CPU only)")->capture_default_str();
    cmd->add_option("--eval-every", a->eval_every, "Evaluate and checkpoint every N steps (0: steps / 10)")->capture_default_str();
    cmd->add_option("--eval-words", a->eval_words, "Test words per length")->capture_default_str();
    cmd->add_option("--out", a->out, "Output folder (metrics.jsonl, summary.json, checkpoint.bin)")->required();
    cmd->add_option("--stop-at", a->stop_at, "Stop after this step with a checkpoint (continue with --resume)");
    cmd->add_flag("--resume", a->resume, "Continue from OUT/checkpoint.bin (bit-identical, on the CPU and on the same GPU model)");
    cmd->add_flag("--json", a->json, "Print the summary JSON on stdout");
    cmd->add_flag("--quiet", a->quiet, "No progress lines on stderr");
    cmd->callback([a] { run_train(*a); });
}

}  // namespace statetrack::cli
