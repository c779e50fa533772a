#include "statetrack/gpu/trainer.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <deque>
#include <filesystem>
#include <future>
#include <ostream>
#include <type_traits>

#include "statetrack/automata/error.hpp"
#include "statetrack/automata/files.hpp"
#include "statetrack/gpu/cpu_backend.hpp"
#include "statetrack/gpu/cuda_backend.hpp"
#include "statetrack/gpu/spectra.hpp"

namespace statetrack::gpu {

namespace {

// Seeds of the streams that training never draws from.
constexpr std::uint64_t eval_salt = 0x6576616c5f736574ULL, spectra_salt = 0x7370656374726121ULL;

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// The fixed test set: `words` words of one length, from a stream that training never draws from.
Batch test_words(const Task& task, std::size_t words, std::size_t length, std::uint64_t seed) {
    return sample_batch(task, words, {length, length}, seed ^ eval_salt, length);
}

// Per-length counts -> the evaluation record.
struct LengthCount {
    std::size_t length = 0, words = 0, right = 0, total = 0;
};
Evaluation summarise(const std::vector<LengthCount>& counts, std::size_t classes) {
    Evaluation e;
    e.chance = 1.0 / double(classes);
    e.min_accuracy = 1;
    for (const LengthCount& c : counts) {
        const double accuracy = double(c.right) / double(c.total);
        e.lengths.push_back({c.length, c.words, accuracy});
        e.accuracy += accuracy;
        e.min_accuracy = std::min(e.min_accuracy, accuracy);
    }
    e.accuracy /= double(e.lengths.size());
    e.scaled_accuracy = (e.accuracy - e.chance) / (1 - e.chance);
    return e;
}

template <class S>
Evaluation evaluate_weights(const Task& task, const ModelConfig& model, const ParameterLayout& layout,
                            std::span<const S> params, LengthRange range, std::size_t words, std::uint64_t seed,
                            Workspace<S>& ws) {
    std::vector<LengthCount> counts;
    std::vector<std::size_t> correct, labelled;
    for (std::size_t length = range.min; length <= range.max; ++length) {
        const Batch batch = test_words(task, words, length, seed);
        forward<S>(model, layout, params, batch, ws);
        count_correct(model, batch, ws, correct, labelled);
        LengthCount c{length, words, 0, 0};
        for (std::size_t b = 0; b < batch.batch; ++b) c.right += correct[b], c.total += labelled[b];
        counts.push_back(c);
    }
    return summarise(counts, model.classes);
}

// The same test set on the GPU: consecutive lengths share one forward pass (padded to the longest
// of them; the model is causal, so padding changes nothing), up to `token_budget` tokens a pass.
Evaluation evaluate_on_cuda(CudaSession& session, const Task& task, LengthRange range, std::size_t words,
                            std::uint64_t seed, std::size_t token_budget) {
    std::vector<LengthCount> counts;
    std::vector<std::size_t> correct, labelled;
    std::vector<float> logits;
    std::size_t length = range.min;
    while (length <= range.max) {
        std::vector<Batch> group;
        std::size_t last = length;
        while (last <= range.max && (group.empty() || (group.size() + 1) * words * last <= token_budget))
            group.push_back(test_words(task, words, last, seed)), ++last;
        const std::size_t T = last - 1;
        Batch chunk;
        chunk.batch = group.size() * words, chunk.length = T;
        chunk.tokens.assign(chunk.batch * T, 0);
        chunk.targets.assign(chunk.batch * T, -1);
        for (std::size_t g = 0; g < group.size(); ++g)
            for (std::size_t b = 0; b < words; ++b) {
                const std::size_t row = g * words + b, len = group[g].length;
                std::copy_n(group[g].tokens.begin() + std::ptrdiff_t(b * len), len, chunk.tokens.begin() + std::ptrdiff_t(row * T));
                std::copy_n(group[g].targets.begin() + std::ptrdiff_t(b * len), len, chunk.targets.begin() + std::ptrdiff_t(row * T));
                chunk.lengths.push_back(std::int32_t(len));
            }
        cuda_forward(session, chunk, logits);
        count_correct<float>(logits, session.config.classes, chunk, correct, labelled);
        for (std::size_t g = 0; g < group.size(); ++g) {
            LengthCount c{length + g, words, 0, 0};
            for (std::size_t b = g * words; b < (g + 1) * words; ++b) c.right += correct[b], c.total += labelled[b];
            counts.push_back(c);
        }
        length = last;
    }
    return summarise(counts, session.config.classes);
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

// What the training loop needs from a backend: one step, evaluation, and the state to save.
struct StepOutcome {
    double loss = 0, norm = 0;
    std::size_t right = 0, labels = 0;  // argmax predictions before the update
};

// The CPU reference in precision S: weights, gradients and moments in host vectors.
template <class S>
struct CpuRun {
    const Task& task;
    const TrainOptions& options;
    ParameterLayout layout;
    std::vector<S> params, grads, m, v;
    Workspace<S> ws;
    std::vector<std::size_t> correct, labelled;

    CpuRun(const Task& t, const TrainOptions& o)
        : task(t), options(o), layout(parameter_layout(o.model)), params(layout.total), grads(layout.total),
          m(layout.total, S(0)), v(layout.total, S(0)) {}
    void start(const Checkpoint* resumed) {
        if (resumed) params = narrow<S>(resumed->params), m = narrow<S>(resumed->m), v = narrow<S>(resumed->v);
        else init_parameters<S>(options.model, layout, options.seed, params);
    }
    // A step in two halves as on the GPU (CudaRun); here the second does the work, in the order begun
    // (the caller keeps the batches until then).
    struct Begun {
        const Batch* batch;
        std::size_t step;
        double lr;
    };
    std::deque<Begun> begun;
    void begin_step(const Batch& batch, std::size_t step, double lr) { begun.push_back({&batch, step, lr}); }
    StepOutcome end_step() {
        const Begun b = begun.front();
        begun.pop_front();
        return step(*b.batch, b.step, b.lr);
    }
    StepOutcome step(const Batch& batch, std::size_t step, double lr) {
        StepOutcome out;
        out.loss = loss_and_gradient<S>(options.model, layout, params, batch, ws, grads);
        out.norm = gradient_norm<S>(grads);
        if (!std::isfinite(out.loss) || !std::isfinite(out.norm)) return out;
        count_correct(options.model, batch, ws, correct, labelled);
        for (std::size_t b = 0; b < batch.batch; ++b) out.right += correct[b], out.labels += labelled[b];
        adamw_step<S>(options.adamw, layout, step, lr, out.norm, params, grads, m, v);
        return out;
    }
    Evaluation evaluate() {
        return evaluate_weights<S>(task, options.model, layout, params, options.test_len, options.eval_words,
                                   options.seed, ws);
    }
    void save(Checkpoint& state) { state.params = widen(params), state.m = widen(m), state.v = widen(v); }
    std::vector<SpectrumSummary> spectra(const Batch& probe) {
        return learned_spectra<S>(options.model, layout, params, probe, ws);
    }
};

// Tokens per evaluation pass on the GPU: a training batch's worth (so the workspace need not grow),
// at least 32k.
std::size_t eval_token_budget(const TrainOptions& o) { return std::max<std::size_t>(o.batch * o.train_len.max, 1 << 15); }

CudaSession open_cuda_session(const TrainOptions& o) {
    CudaOptions cuda;
    cuda.matmul = o.matmul, cuda.device = o.cuda_device, cuda.chunked = o.cuda_chunked;
    cuda.packed = o.cuda_packed;
    return make_cuda_session(o.model, cuda);
}

// The CUDA backend: everything stays on the device; host copies only for checkpoints and spectra.
struct CudaRun {
    const Task& task;
    const TrainOptions& options;
    CudaSession session;
    std::vector<float> params, m, v;
    std::size_t packed_steps = 0;  // steps that ran on packed words (CudaStepResult::packed), for summary.json

    CudaRun(const Task& t, const TrainOptions& o) : task(t), options(o), session(open_cuda_session(o)) {
        params.resize(session.layout.total), m.resize(session.layout.total), v.resize(session.layout.total);
    }
    void start(const Checkpoint* resumed) {
        if (resumed) {
            params = narrow<float>(resumed->params), m = narrow<float>(resumed->m), v = narrow<float>(resumed->v);
            upload_moments(session, m, v);
        } else {
            init_parameters<float>(options.model, session.layout, options.seed, params);
        }
        upload_parameters(session, params);
    }
    // Up to two steps in flight: the host samples and stages the next batch while a step runs.
    void begin_step(const Batch& batch, std::size_t step, double lr) {
        cuda_start_step(session, batch, options.adamw, step, lr);
    }
    StepOutcome end_step() {
        const CudaStepResult r = cuda_finish_step(session);
        packed_steps += r.packed;
        return {r.loss, r.grad_norm, r.correct, r.labelled};
    }
    Evaluation evaluate() {
        return evaluate_on_cuda(session, task, options.test_len, options.eval_words, options.seed,
                                eval_token_budget(options));
    }
    void save(Checkpoint& state) {
        download_parameters(session, params);
        download_moments(session, m, v);
        state.params = widen(params), state.m = widen(m), state.v = widen(v);
    }
    std::vector<SpectrumSummary> spectra(const Batch& probe) {
        download_parameters(session, params);
        Workspace<float> ws;
        return learned_spectra<float>(options.model, session.layout, params, probe, ws);
    }
};

// The files of an evaluation (metrics, checkpoint, best checkpoint) encoded and written on a thread of
// their own, so that the steps after it need not wait: each file's fsync made these writes ~40 ms an
// evaluation on the device machine (8% of a parity run), and the checkpoint's encoding grows with
// its history. One evaluation's files at a time, in order; wait() rethrows a write's error (an
// InputError naming the file).
struct EvaluationFiles {
    std::string metrics_path, metrics;  // every record so far, a line each
    std::string checkpoint_path, best_path;
    Checkpoint checkpoint;
    bool best = false;  // the checkpoint is also the best so far
};
struct BackgroundWrites {
    std::future<void> pending;
    void wait() {
        if (pending.valid()) pending.get();
    }
    // A finished write's error at once, not at the next evaluation (called every step).
    void poll() {
        if (pending.valid() && pending.wait_for(std::chrono::seconds(0)) == std::future_status::ready) pending.get();
    }
    void start(EvaluationFiles files) {
        wait();
        pending = std::async(std::launch::async, [files = std::move(files)] {
            write_file_atomically(files.metrics_path, files.metrics);
            const std::string bytes = encode_checkpoint(files.checkpoint);
            write_file_atomically(files.checkpoint_path, bytes);
            if (files.best) write_file_atomically(files.best_path, bytes);
        });
    }
    ~BackgroundWrites() {
        if (pending.valid()) pending.wait();  // on the way out of another error: the files are whole
    }
};

template <class Run>
nlohmann::json train_impl(const Task& task, const TrainOptions& options, std::ostream* progress) {
    namespace fs = std::filesystem;
    const auto start = Clock::now();
    const ModelConfig& model = options.model;
    const std::string checkpoint_path = (fs::path(options.out_dir) / "checkpoint.bin").string();
    const std::string metrics_path = (fs::path(options.out_dir) / "metrics.jsonl").string();
    // The weights of the best evaluation so far (scaled accuracy; the first of equals): a run whose
    // accuracy later falls (seen on parity at lr 1e-2: 1.0 at step 800, 0.75 at the end) keeps them.
    const std::string best_path = (fs::path(options.out_dir) / "best.bin").string();
    std::error_code ec;
    fs::create_directories(options.out_dir, ec);
    if (!fs::is_directory(options.out_dir, ec)) throw InputError(options.out_dir, "--out", "cannot create the output folder");

    // The one allocation of the run: weights, gradients, moments, and the workspace.
    Checkpoint state;
    state.task = task;
    state.options = options;
    if (options.resume) {
        state = read_checkpoint(checkpoint_path);
        check_resumable(state, task, options, checkpoint_path);
    }
    Run run(task, options);
    run.start(options.resume ? &state : nullptr);
    const std::size_t eval_every = options.eval_interval();
    double loss_sum = 0, tokens = 0;
    std::size_t loss_count = 0, right = 0, labels = 0;
    std::size_t last_good = state.step;
    bool have_checkpoint = options.resume;
    auto last_print = start;
    const std::size_t first_step = state.step;
    nlohmann::json last_eval;
    double best = -INFINITY;
    std::size_t best_step = 0;
    double eval_seconds = 0, save_seconds = 0;  // where the wall time went, besides the steps
    std::string metrics;  // metrics.jsonl: a line per record
    for (const auto& record : state.history) metrics += record.dump() + "\n";
    BackgroundWrites writes;
    for (const auto& record : state.history)
        if (const double a = record["eval"]["scaled_accuracy"].get<double>(); a > best) best = a, best_step = record["step"].get<std::size_t>();
    const std::size_t last_step = options.stop_at ? options.stop_at : options.steps;
    // Each step's batch is sampled, and the step begun, while the step before it runs (on the GPU;
    // on the CPU end_step does the work): the batches of the steps begun and not ended, oldest first.
    std::deque<Batch> begun;
    auto begin_step = [&](std::size_t step) {
        begun.push_back(sample_batch(task, options.batch, options.train_len, options.seed, step + 1));
        run.begin_step(begun.back(), step, learning_rate(options.adamw, step, options.steps));
    };
    for (std::size_t step = first_step; step < last_step; ++step) {
        if (begun.empty()) begin_step(step);
        // the next step goes in before this one ends, unless an evaluation comes between them
        if (const std::size_t next = step + 1; next < last_step && next % eval_every != 0) begin_step(next);
        const StepOutcome outcome = run.end_step();
        writes.poll();
        const Batch batch = std::move(begun.front());
        begun.pop_front();
        const double lr = learning_rate(options.adamw, step, options.steps);
        if (!std::isfinite(outcome.loss) || !std::isfinite(outcome.norm)) {
            writes.wait();  // the checkpoint named below is on disk
            const std::string kept = have_checkpoint
                                         ? fmt::format("the last good checkpoint (step {}) is kept in {}", last_good, checkpoint_path)
                                         : std::string("no checkpoint had been written yet");
            throw InputError(options.out_dir, fmt::format("step {}", step + 1),
                             fmt::format("training diverged: the {} is not finite (lower --lr or set --clip); {}",
                                         std::isfinite(outcome.loss) ? "gradient" : "loss", kept));
        }
        right += outcome.right, labels += outcome.labels;
        for (auto len : batch.lengths) tokens += double(len);
        loss_sum += outcome.loss, loss_count += 1;
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
            const auto eval_start = Clock::now();
            const Evaluation e = run.evaluate();
            eval_seconds += seconds_since(eval_start);
            const auto save_start = Clock::now();
            last_eval = evaluation_to_json(e, true);
            state.history.push_back({{"step", done},
                                     {"lr", lr},
                                     {"train_loss", loss_sum / double(loss_count)},
                                     {"train_accuracy", double(right) / double(std::max<std::size_t>(labels, 1))},
                                     {"tokens", tokens},
                                     {"elapsed_s", seconds_since(start)},
                                     {"eval", last_eval}});
            loss_sum = 0, loss_count = 0, right = 0, labels = 0;
            metrics += state.history.back().dump() + "\n";
            state.step = done;
            run.save(state);
            EvaluationFiles files{metrics_path, metrics, checkpoint_path, best_path, {}, e.scaled_accuracy > best};
            // the weights move to the writer (the next evaluation downloads them again); the rest is copied
            files.checkpoint.task = state.task, files.checkpoint.options = state.options, files.checkpoint.step = done;
            files.checkpoint.params = std::move(state.params), files.checkpoint.m = std::move(state.m);
            files.checkpoint.v = std::move(state.v), files.checkpoint.history = state.history;
            if (files.best) best = e.scaled_accuracy, best_step = done;
            writes.start(std::move(files));
            last_good = done, have_checkpoint = true;
            save_seconds += seconds_since(save_start);
            if (progress && options.progress)
                *progress << fmt::format("eval step {}: accuracy {:.4f}, scaled {:.4f} (lengths {}..{})\n", done, e.accuracy,
                                         e.scaled_accuracy, options.test_len.min, options.test_len.max)
                          << std::flush;
        }
    }
    if (last_eval.is_null())  // resumed from a finished run: evaluate its weights again
        last_eval = evaluation_to_json(run.evaluate(), true);
    const Batch probe = sample_batch(task, 8, options.train_len, options.seed ^ spectra_salt, 0);
    const auto spectra = run.spectra(probe);
    const auto wait_start = Clock::now();
    writes.wait();
    save_seconds += seconds_since(wait_start);
    const double wall = seconds_since(start);
    nlohmann::json summary = {
        {"format", "statetrack.train-summary/1"},
        {"device", to_string(options.device)},
        {"task", {{"spec", task.spec}, {"name", task.dfa.name}, {"states", task.dfa.num_states()},
                  {"letters", task.dfa.num_letters()}, {"label", to_string(task.label)}, {"target", to_string(task.target)}}},
        {"options", options_to_json(options)},
        {"parameters", parameter_layout(model).total},
        {"steps", options.steps},
        {"stopped_at_step", state.step},
        {"resumed_from_step", options.resume ? nlohmann::json(first_step) : nlohmann::json(nullptr)},
        {"final", last_eval},
        {"best_scaled_accuracy", best},
        {"best_step", best_step},
        {"wall_s", wall},
        {"evaluation_s", eval_seconds},
        {"checkpoint_s", save_seconds},  // preparing the evaluations' files, and waiting for their writes
        {"tokens_per_s", tokens / wall},
        {"spectra", model.mixer == Mixer::lstm ? nlohmann::json("none: the LSTM has no linear transition") : spectra_to_json(spectra)},
        {"outputs", {{"metrics", metrics_path}, {"checkpoint", checkpoint_path}, {"best_checkpoint", best_path}}}};
    if constexpr (std::is_same_v<Run, CudaRun>) {
        summary["gpu"] = cuda_device_description();
        summary["packed_steps"] = run.packed_steps;  // of the steps this process ran (--cuda-words)
    }
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

Evaluation evaluate(const Checkpoint& c, LengthRange lengths, std::size_t words, Device device, int cuda_device) {
    const ModelConfig& model = c.options.model;
    const ParameterLayout layout = parameter_layout(model);
    if (device == Device::cuda) {
        TrainOptions o = c.options;
        o.cuda_device = cuda_device;
        CudaSession session = open_cuda_session(o);
        upload_parameters(session, narrow<float>(c.params));
        return evaluate_on_cuda(session, c.task, lengths, words, c.options.seed, eval_token_budget(o));
    }
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
    if (options.device == Device::cuda) return train_impl<CudaRun>(task, options, progress);
    return options.precision == Precision::fp64 ? train_impl<CpuRun<double>>(task, options, progress)
                                                : train_impl<CpuRun<float>>(task, options, progress);
}

}  // namespace statetrack::gpu
