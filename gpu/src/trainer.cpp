#include "statetrack/gpu/trainer.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <ostream>

#include "statetrack/automata/error.hpp"
#include "statetrack/automata/files.hpp"
#include "statetrack/gpu/cpu_backend.hpp"
#include "statetrack/gpu/spectra.hpp"

namespace statetrack::gpu {

namespace {

// Seeds of the streams that training never draws from.
constexpr std::uint64_t eval_salt = 0x6576616c5f736574ULL, spectra_salt = 0x7370656374726121ULL;

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

template <class S>
Evaluation evaluate_weights(const Task& task, const ModelConfig& model, const ParameterLayout& layout,
                            std::span<const S> params, LengthRange range, std::size_t words, std::uint64_t seed,
                            Workspace<S>& ws) {
    Evaluation e;
    e.chance = 1.0 / double(model.classes);
    e.min_accuracy = 1;
    std::vector<std::size_t> correct, labelled;
    for (std::size_t length = range.min; length <= range.max; ++length) {
        const Batch batch = sample_batch(task, words, {length, length}, seed ^ eval_salt, length);
        forward<S>(model, layout, params, batch, ws);
        count_correct(model, batch, ws, correct, labelled);
        std::size_t right = 0, total = 0;
        for (std::size_t b = 0; b < batch.batch; ++b) right += correct[b], total += labelled[b];
        const double accuracy = double(right) / double(total);
        e.lengths.push_back({length, words, accuracy});
        e.accuracy += accuracy;
        e.min_accuracy = std::min(e.min_accuracy, accuracy);
    }
    e.accuracy /= double(e.lengths.size());
    e.scaled_accuracy = (e.accuracy - e.chance) / (1 - e.chance);
    return e;
}

template <class S>
std::vector<S> narrow(const std::vector<double>& values) {
    return std::vector<S>(values.begin(), values.end());
}
template <class S>
std::vector<double> widen(const std::vector<S>& values) {
    return std::vector<double>(values.begin(), values.end());
}

// The fields that must agree between a checkpoint and the options of a --resume.
void check_resumable(const Checkpoint& c, const Task& task, const TrainOptions& options, const std::string& path) {
    if (task_to_json(c.task) != task_to_json(task))
        throw InputError(path, "/task", fmt::format("the checkpoint was trained on task '{}', not on '{}'", c.task.spec, task.spec));
    const auto saved = options_to_json(c.options), asked = options_to_json(options);
    std::vector<std::string> differ;
    for (const auto& [key, value] : saved.items())
        if (asked.at(key) != value) differ.push_back(fmt::format("{} (checkpoint {}, asked {})", key, value.dump(), asked.at(key).dump()));
    if (!differ.empty())
        throw InputError(path, "/options", fmt::format("cannot resume with different settings: {}", fmt::join(differ, "; ")));
}

template <class S>
nlohmann::json train_impl(const Task& task, const TrainOptions& options, std::ostream* progress) {
    namespace fs = std::filesystem;
    const auto start = Clock::now();
    const ModelConfig& model = options.model;
    const ParameterLayout layout = parameter_layout(model);
    const std::string checkpoint_path = (fs::path(options.out_dir) / "checkpoint.bin").string();
    const std::string metrics_path = (fs::path(options.out_dir) / "metrics.jsonl").string();
    std::error_code ec;
    fs::create_directories(options.out_dir, ec);
    if (!fs::is_directory(options.out_dir, ec)) throw InputError(options.out_dir, "--out", "cannot create the output folder");

    // The one allocation of the run: weights, gradients, moments, and the workspace (in forward()).
    Checkpoint state;
    state.task = task;
    state.options = options;
    std::vector<S> params(layout.total), grads(layout.total), m(layout.total, S(0)), v(layout.total, S(0));
    if (options.resume) {
        state = read_checkpoint(checkpoint_path);
        check_resumable(state, task, options, checkpoint_path);
        params = narrow<S>(state.params), m = narrow<S>(state.m), v = narrow<S>(state.v);
    } else {
        init_parameters<S>(model, layout, options.seed, params);
    }
    Workspace<S> ws;
    const std::size_t eval_every = options.eval_interval();
    double loss_sum = 0, tokens = 0;
    std::size_t loss_count = 0, right = 0, labels = 0;
    std::size_t last_good = state.step;
    bool have_checkpoint = options.resume;
    auto last_print = start;
    const std::size_t first_step = state.step;
    std::vector<std::size_t> correct, labelled;
    nlohmann::json last_eval;
    const std::size_t last_step = options.stop_at ? options.stop_at : options.steps;
    for (std::size_t step = first_step; step < last_step; ++step) {
        const Batch batch = sample_batch(task, options.batch, options.train_len, options.seed, step + 1);
        const double loss = loss_and_gradient<S>(model, layout, params, batch, ws, grads);
        const double norm = gradient_norm<S>(grads);
        if (!std::isfinite(loss) || !std::isfinite(norm)) {
            const std::string kept = have_checkpoint
                                         ? fmt::format("the last good checkpoint (step {}) is kept in {}", last_good, checkpoint_path)
                                         : std::string("no checkpoint had been written yet");
            throw InputError(options.out_dir, fmt::format("step {}", step + 1),
                             fmt::format("training diverged: the {} is not finite (lower --lr or set --clip); {}",
                                         std::isfinite(loss) ? "gradient" : "loss", kept));
        }
        count_correct(model, batch, ws, correct, labelled);
        for (std::size_t b = 0; b < batch.batch; ++b) right += correct[b], labels += labelled[b];
        for (auto len : batch.lengths) tokens += double(len);
        loss_sum += loss, loss_count += 1;
        const double lr = learning_rate(options.adamw, step, options.steps);
        adamw_step<S>(options.adamw, layout, step, lr, norm, params, grads, m, v);
        const std::size_t done = step + 1;
        if (progress && options.progress && seconds_since(last_print) >= 1.0) {
            last_print = Clock::now();
            const double elapsed = seconds_since(start);
            const double rate = double(done - first_step) / elapsed;
            *progress << fmt::format("step {}/{}  loss {:.4f}  acc {:.3f}  {:.0f} tok/s  ETA {:.0f}s\n", done, options.steps,
                                     loss_sum / double(loss_count), double(right) / double(std::max<std::size_t>(labels, 1)),
                                     tokens / elapsed, double(options.steps - done) / rate)
                      << std::flush;
        }
        if (done % eval_every == 0 || done == last_step) {
            const Evaluation e = evaluate_weights<S>(task, model, layout, params, options.test_len, options.eval_words,
                                                     options.seed, ws);
            last_eval = evaluation_to_json(e, true);
            state.history.push_back({{"step", done},
                                     {"lr", lr},
                                     {"train_loss", loss_sum / double(loss_count)},
                                     {"train_accuracy", double(right) / double(std::max<std::size_t>(labels, 1))},
                                     {"tokens", tokens},
                                     {"elapsed_s", seconds_since(start)},
                                     {"eval", last_eval}});
            loss_sum = 0, loss_count = 0, right = 0, labels = 0;
            std::string lines;
            for (const auto& record : state.history) lines += record.dump() + "\n";
            write_file_atomically(metrics_path, lines);
            state.step = done;
            state.params = widen(params), state.m = widen(m), state.v = widen(v);
            write_checkpoint(checkpoint_path, state);
            last_good = done, have_checkpoint = true;
            if (progress && options.progress)
                *progress << fmt::format("eval step {}: accuracy {:.4f}, scaled {:.4f} (lengths {}..{})\n", done, e.accuracy,
                                         e.scaled_accuracy, options.test_len.min, options.test_len.max)
                          << std::flush;
        }
    }
    if (last_eval.is_null()) {  // resumed from a finished run: evaluate its weights again
        last_eval = evaluation_to_json(evaluate_weights<S>(task, model, layout, params, options.test_len,
                                                           options.eval_words, options.seed, ws), true);
    }
    const Batch probe = sample_batch(task, 8, options.train_len, options.seed ^ spectra_salt, 0);
    const auto spectra = learned_spectra<S>(model, layout, params, probe, ws);
    double best = -INFINITY;
    for (const auto& record : state.history) best = std::max(best, record["eval"]["scaled_accuracy"].get<double>());
    const double wall = seconds_since(start);
    nlohmann::json summary = {
        {"format", "statetrack.train-summary/1"},
        {"device", "cpu"},
        {"task", {{"spec", task.spec}, {"name", task.dfa.name}, {"states", task.dfa.num_states()},
                  {"letters", task.dfa.num_letters()}, {"label", to_string(task.label)}, {"target", to_string(task.target)}}},
        {"options", options_to_json(options)},
        {"parameters", layout.total},
        {"steps", options.steps},
        {"stopped_at_step", state.step},
        {"resumed_from_step", options.resume ? nlohmann::json(first_step) : nlohmann::json(nullptr)},
        {"final", last_eval},
        {"best_scaled_accuracy", best},
        {"wall_s", wall},
        {"tokens_per_s", tokens / wall},
        {"spectra", model.mixer == Mixer::lstm ? nlohmann::json("none: the LSTM has no linear transition") : spectra_to_json(spectra)},
        {"outputs", {{"metrics", metrics_path}, {"checkpoint", checkpoint_path}}}};
    write_file_atomically((fs::path(options.out_dir) / "summary.json").string(), summary.dump(2) + "\n");
    return summary;
}

}  // namespace

nlohmann::json evaluation_to_json(const Evaluation& e, bool per_length) {
    nlohmann::json out = {{"accuracy", e.accuracy}, {"min_accuracy", e.min_accuracy}, {"chance", e.chance},
                          {"scaled_accuracy", e.scaled_accuracy}};
    if (!e.lengths.empty()) out["lengths"] = {e.lengths.front().length, e.lengths.back().length};
    if (per_length) {
        nlohmann::json rows = nlohmann::json::array();
        for (const auto& l : e.lengths) rows.push_back({{"length", l.length}, {"words", l.words}, {"accuracy", l.accuracy}});
        out["per_length"] = rows;
    }
    return out;
}

Evaluation evaluate(const Checkpoint& c, LengthRange lengths, std::size_t words) {
    const ModelConfig& model = c.options.model;
    const ParameterLayout layout = parameter_layout(model);
    if (c.options.precision == Precision::fp64) {
        Workspace<double> ws;
        return evaluate_weights<double>(c.task, model, layout, c.params, lengths, words, c.options.seed, ws);
    }
    Workspace<float> ws;
    const auto params = narrow<float>(c.params);
    return evaluate_weights<float>(c.task, model, layout, params, lengths, words, c.options.seed, ws);
}

nlohmann::json train(const Task& task, const TrainOptions& given, std::ostream* progress) {
    TrainOptions options = given;
    options.model.vocab = vocab_size(task);
    options.model.classes = num_classes(task);
    validate(options);
    return options.precision == Precision::fp64 ? train_impl<double>(task, options, progress)
                                                : train_impl<float>(task, options, progress);
}

}  // namespace statetrack::gpu
