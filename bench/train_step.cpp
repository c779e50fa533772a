// bench_train_step: the CUDA backend's training step (forward, loss, backward, AdamW as one CUDA
// graph) at the paper's sizes: ms/step, tokens/s and device memory; and, with --learn, the wall
// time for a deltanet to reach scaled accuracy 1.0 on parity at test lengths 40-256.
//
//   bench_train_step [--steps N] [--out FILE] [--learn | --only-learn] [--learn-steps N (6000)] [--lr X (1e-2)]
//                    [--only TEXT (the rows whose name holds TEXT)] [--halves-from-rows N (CudaOptions' default)]
//   bench_train_step --profile [--profile-model M] [--profile-matmul P] [--profile-words MIN]
//                        (for ncu: deltanet, or M, with TF32 products, or P, at T = 40 and 256, three
//                        steps each without a graph; words of lengths MIN..T, as training's, if given)
//
// Targets (issue 7, one H100): 2-layer deltanet, d_model 128, 4 heads, batch 1024: <= 1.7 ms/step
// at T = 40 and <= 6 ms/step at T = 256. Without a GPU it says so and exits 0.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "statetrack/automata/dfa.hpp"
#include "statetrack/automata/files.hpp"
#include "statetrack/gpu/cuda_backend.hpp"
#include "statetrack/gpu/random.hpp"
#include "steps.hpp"
#include "words.hpp"

using namespace statetrack;
using namespace statetrack::gpu;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }
double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

struct Shape {
    std::string name, model;
    std::size_t layers, T, vocab, classes;
    MatmulPrecision matmul = MatmulPrecision::tf32;
    bool graphs = true;
    std::size_t shortest = 0;  // words of lengths shortest..T (the first T long), as in training; 0: all T
    bool packed = true;        // CudaOptions::packed: such words' steps on their rows only
    bool chunked = true;       // CudaOptions::chunked: the delta rules in chunks where they run so
    bool halves = true;        // CudaOptions::halves_from_rows at its default; false: 0 (the whole batch)
};

// halves_from_rows: CudaOptions::halves_from_rows for the rows that take halves (Shape::halves)
nlohmann::json time_shape(const Shape& s, std::size_t B, std::size_t steps,
                          std::size_t halves_from_rows = CudaOptions{}.halves_from_rows) {
    ModelConfig c;
    parse_model_name(s.model, c);
    c.eig = EigRange::signed_unit;
    c.layers = s.layers, c.d_model = 128, c.heads = 4, c.vocab = s.vocab, c.classes = s.classes;
    validate(c);
    const std::size_t before = cuda_device_bytes_in_use();
    CudaOptions options{s.matmul, s.graphs, false};
    options.packed = s.packed, options.chunked = s.chunked;
    options.halves_from_rows = s.halves ? halves_from_rows : 0;
    CudaSession session = make_cuda_session(c, options);
    const auto layout = parameter_layout(c);
    std::vector<float> w(layout.total);
    init_parameters<float>(c, layout, 1, w);
    upload_parameters(session, w);
    AdamWOptions o;
    std::vector<Batch> batches;  // rotate through a few, as training would
    for (std::size_t i = 0; i < 4; ++i) batches.push_back(bench::random_words(B, s.T, s.shortest, c.vocab, c.classes, i));
    // Warm up both slots, so that no first capture is timed with the pipelined steps, then the single
    // steps' slot. (--profile, steps 0: three steps, one launch per kernel, for ncu.)
    if (steps) bench::warm_up_both_slots(session, batches, o);
    for (std::size_t i = 0; i < (steps ? 4 : 3); ++i) cuda_train_step(session, batches[i], o, i, 1e-4);
    std::vector<double> times;
    double loss = 0;
    for (std::size_t i = 0; i < steps; ++i) {
        const auto start = Clock::now();
        loss = cuda_train_step(session, batches[i % 4], o, 3 + i, 1e-4).loss;
        times.push_back(seconds_since(start));
    }
    const double ms = 1e3 * median(times);
    // The same steps back to back as `statetrack train` runs them: the next begun before the one
    // before ends (two in flight), so the GPU does not wait for the host between steps.
    const auto start = Clock::now();
    if (steps) loss = bench::steps_back_to_back(session, batches, o, steps, 0, 3 + steps).loss;
    const double ms_pipelined = steps ? 1e3 * seconds_since(start) / double(steps) : 0;
    const std::size_t peak = cuda_device_bytes_in_use() - before;
    return {{"shape", s.name},      {"model", s.model},
            {"layers", s.layers},   {"d_model", 128},
            {"heads", 4},           {"batch", B},
            {"T", s.T},             {"matmul", to_string(s.matmul)},
            {"graphs", s.graphs},   {"shortest", s.shortest ? s.shortest : s.T},
            {"packed", cuda_packs_words(session, batches[0])}, {"chunked", cuda_runs_chunked(session)},
            {"halves", cuda_splits_in_halves(session, batches[0])}, {"halves_from_rows", options.halves_from_rows},
            {"ms_per_step", ms},    {"tokens_per_s", double(B * s.T) / (ms * 1e-3)},
            {"ms_per_step_pipelined", ms_pipelined},
            {"session_mib", double(cuda_session_bytes(session)) / double(1 << 20)},
            {"device_mib", double(peak) / double(1 << 20)},
            {"loss", loss}};
}

automata::Dfa parity_dfa() {
    auto dfa = automata::make_dfa(2, {"0", "1"}, "parity");
    dfa.next(0, 1) = 1;
    dfa.next(1, 1) = 0;
    dfa.accepting[0] = true;
    return dfa;
}

// All test words (words_per_length of every length 40..256) in one batch padded to 256.
Batch test_batch(const Task& task, std::size_t words_per_length) {
    Batch all;
    all.length = 256;
    for (std::size_t len = 40; len <= 256; ++len) {
        const Batch b = sample_batch(task, words_per_length, {len, len}, 12345, 1'000'000 + len);
        for (std::size_t i = 0; i < b.batch; ++i) {
            all.tokens.insert(all.tokens.end(), b.tokens.begin() + std::ptrdiff_t(i * len),
                              b.tokens.begin() + std::ptrdiff_t((i + 1) * len));
            all.tokens.resize((all.batch + 1) * 256, 0);
            all.targets.insert(all.targets.end(), b.targets.begin() + std::ptrdiff_t(i * len),
                               b.targets.begin() + std::ptrdiff_t((i + 1) * len));
            all.targets.resize((all.batch + 1) * 256, -1);
            all.lengths.push_back(std::int32_t(len));
            ++all.batch;
        }
    }
    return all;
}

// Scaled accuracy over the final labels (mean over lengths of per-length accuracy).
double scaled_accuracy(CudaSession& session, const Batch& test, std::vector<float>& logits) {
    cuda_forward(session, test, logits);
    std::size_t correct = 0, total = 0;
    for (std::size_t b = 0; b < test.batch; ++b) {
        const std::size_t n = b * test.length + std::size_t(test.lengths[b]) - 1;
        const int target = test.targets[n];
        if (target < 0) continue;
        const float* z = logits.data() + n * 2;
        correct += (z[1] > z[0] ? 1 : 0) == target;
        ++total;
    }
    const double acc = double(correct) / double(total);  // every length has the same number of words
    return (acc - 0.5) / 0.5;
}

nlohmann::json learn(EigRange eig, std::size_t steps, double lr, std::uint64_t seed) {
    Task task{parity_dfa(), "zoo:parity", LabelMode::final_position, Target::accept};
    ModelConfig c;
    c.mixer = Mixer::deltanet, c.eig = eig, c.layers = 2, c.d_model = 128, c.heads = 4;
    c.vocab = vocab_size(task), c.classes = num_classes(task);
    validate(c);
    CudaSession session = make_cuda_session(c, {MatmulPrecision::tf32, true, false});
    const auto layout = parameter_layout(c);
    std::vector<float> w(layout.total);
    init_parameters<float>(c, layout, seed, w);
    upload_parameters(session, w);
    AdamWOptions o;
    o.lr = lr;
    const Batch test = test_batch(task, 8);
    std::vector<float> logits;
    const auto start = Clock::now();
    nlohmann::json curve = nlohmann::json::array();
    double best = -1, solved_at = -1;
    std::size_t step = 0;
    for (; step < steps; ++step) {
        const Batch batch = sample_batch(task, 1024, {3, 40}, seed, step);
        const double loss = cuda_train_step(session, batch, o, step, learning_rate(o, step, steps)).loss;
        if ((step + 1) % 100 == 0 || step + 1 == steps) {
            const double scaled = scaled_accuracy(session, test, logits);
            best = std::max(best, scaled);
            curve.push_back({{"step", step + 1}, {"loss", loss}, {"scaled_accuracy", scaled},
                             {"seconds", seconds_since(start)}});
            fmt::print(stderr, "  eig {} step {} loss {:.4f} scaled accuracy {:.4f} ({:.1f} s)\n", to_string(eig),
                       step + 1, loss, scaled, seconds_since(start));
            if (scaled >= 1.0) {
                solved_at = seconds_since(start);
                ++step;
                break;
            }
        }
    }
    return {{"task", "zoo:parity"}, {"model", "deltanet"}, {"eig", to_string(eig)}, {"layers", 2},
            {"d_model", 128},       {"heads", 4},          {"batch", 1024},         {"lr", lr},
            {"schedule_steps", steps}, {"steps_run", step}, {"best_scaled_accuracy", best},
            {"seconds_to_solve", solved_at}, {"seconds", seconds_since(start)}, {"curve", curve}};
}

}  // namespace

int main(int argc, char** argv) {
    // lr 1e-2 over 6000 steps: the setting that reached scaled accuracy 1.0 through `statetrack train`
    // (docs/training.md); 1e-3 stayed below 0.95 in this budget
    std::size_t steps = 50, learn_steps = 6000, profile_words = 0, halves_from_rows = CudaOptions{}.halves_from_rows;
    std::string only;  // --only: the rows whose name holds it
    double lr = 1e-2;
    bool do_learn = false, only_learn = false, profile = false, profile_options_given = false;
    std::string out = "bench_train_step.json", profile_model = "deltanet", profile_matmul = "tf32";
    const char* usage = "usage: bench_train_step [--steps N] [--out FILE] [--learn|--only-learn] [--learn-steps N] [--lr X] "
                        "[--only TEXT] [--halves-from-rows N] "
                        "[--profile [--profile-model M] [--profile-matmul P] [--profile-words MIN]]\n";
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto value = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
        try {
            if (a == "--steps") steps = std::stoul(value());
            else if (a == "--out") out = value();
            else if (a == "--learn") do_learn = true;
            else if (a == "--only-learn") do_learn = only_learn = true;
            else if (a == "--learn-steps") learn_steps = std::stoul(value());
            else if (a == "--lr") lr = std::stod(value());
            else if (a == "--only") only = value();
            else if (a == "--halves-from-rows") halves_from_rows = std::stoul(value());
            else if (a == "--profile") profile = true;
            else if (a == "--profile-model") profile_model = value(), profile_options_given = true;
            else if (a == "--profile-matmul") profile_matmul = value(), profile_options_given = true;
            else if (a == "--profile-words") profile_words = std::stoul(value()), profile_options_given = true;
            else {
                fmt::print(stderr, "{}", usage);
                return 2;
            }
        } catch (const std::logic_error&) {  // stoul / stod: not a number
            fmt::print(stderr, "bench_train_step: {} needs a number\n{}", a, usage);
            return 2;
        }
    }
    MatmulPrecision matmul = MatmulPrecision::tf32;
    if (profile_options_given) {  // the options and the names checked before any device work
        ModelConfig check;
        try {
            if (!profile) throw std::invalid_argument("--profile-model, --profile-matmul and --profile-words need --profile");
            if (profile_words > 40) throw std::invalid_argument("--profile-words: at most 40 (the shorter T)");
            parse_model_name(profile_model, check);
            matmul = parse_matmul_precision(profile_matmul);
        } catch (const std::exception& e) {
            fmt::print(stderr, "bench_train_step: {}\n", e.what());
            return 2;
        }
    }
    std::string why;
    if (!cuda_available(&why)) {
        fmt::print("bench_train_step: no CUDA device ({}); nothing to measure\n", why);
        return 0;
    }
    if (profile) {
        // For a profiler (ncu): the model at T = 40 then T = 256, three steps each without a graph, so
        // every kernel shows as its own launch; the last step of each is the one to read.
        for (std::size_t T : {40, 256})
            time_shape({profile_model, profile_model, 2, T, 2, 2, matmul, false, profile_words}, 1024, 0);
        return 0;
    }
    nlohmann::json result = {{"device", cuda_device_description()}, {"steps", steps}};
    nlohmann::json rows = nlohmann::json::array();
    if (!only_learn) {
        std::vector<Shape> shapes;
        for (std::size_t T : {40, 256}) {
            shapes.push_back({"deltanet", "deltanet", 2, T, 2, 2});
            shapes.push_back({"mamba", "mamba", 2, T, 2, 2});
            shapes.push_back({"deltaproduct:2", "deltaproduct:2", 2, T, 2, 2});
            shapes.push_back({"modarith (3 layers)", "deltanet", 3, T, 8, 5});
        }
        for (std::size_t T : {40, 256}) shapes.push_back({"deltanet, bf16 products", "deltanet", 2, T, 2, 2, MatmulPrecision::bf16});
        // steps in two halves of the batch (CudaOptions::halves_from_rows: T = 256 here; T = 128 runs whole at the
        // default, or in halves with --halves-from-rows 131072) against the whole batch
        shapes.push_back({"deltanet, bf16 products", "deltanet", 2, 128, 2, 2, MatmulPrecision::bf16});
        for (const std::size_t T : {128, 256}) {
            shapes.push_back({"deltanet, bf16, whole batch", "deltanet", 2, T, 2, 2, MatmulPrecision::bf16, true, 0, true,
                              true, false});
            shapes.push_back({"deltanet, whole batch", "deltanet", 2, T, 2, 2, MatmulPrecision::tf32, true, 0, true, true,
                              false});
        }
        shapes.push_back({"deltanet, fp32 products", "deltanet", 2, 40, 2, 2, MatmulPrecision::fp32});
        shapes.push_back({"deltanet, no graph", "deltanet", 2, 40, 2, 2, MatmulPrecision::tf32, false});
        shapes.push_back({"lstm", "lstm", 2, 40, 2, 2});
        // training's batches: lengths 3..40 padded to 40 (the recurrences stop at each word's end)
        for (const char* model : {"deltanet", "mamba", "deltaproduct:2"})
            shapes.push_back({std::string(model) + ", words 3-40", model, 2, 40, 2, 2, MatmulPrecision::tf32, true, 3});
        // deltanet packs such words (cuda_packs_words): the same batches on the padded rows, and with bf16 products
        shapes.push_back({"deltanet, 3-40, padded", "deltanet", 2, 40, 2, 2, MatmulPrecision::tf32, true, 3, false});
        shapes.push_back({"deltanet, 3-40, bf16", "deltanet", 2, 40, 2, 2, MatmulPrecision::bf16, true, 3});
        // deltaproduct:3 and :4 (three and four factors a token) in chunks and token by token
        for (const char* model : {"deltaproduct:3", "deltaproduct:4"})
            for (const bool chunked : {true, false}) {
                const std::string name = std::string(model) + (chunked ? "" : " steps");
                shapes.push_back({name, model, 2, 256, 2, 2, MatmulPrecision::tf32, true, 0, true, chunked});
                shapes.push_back({name + ", 3-40", model, 2, 40, 2, 2, MatmulPrecision::tf32, true, 3, true, chunked});
            }
        // ms/step: the median of single steps, each waited for; pipelined: steps back to back, as training
        // runs them (the next begun while one runs). session MiB: what the session allocated (exact);
        // device MiB: the growth of the GPU's memory in use (cudaMemGetInfo: cuBLAS's and the graphs'
        // too, but the driver's release of an earlier session's memory can make it read low)
        fmt::print("{:<26} {:>5} {:>6} {:>5} {:>10} {:>10} {:>14} {:>11} {:>11}\n", "shape", "T", "matmul", "graph",
                   "ms/step", "pipelined", "tokens/s", "session MiB", "device MiB");
        for (const Shape& s : shapes) {
            if (s.name.find(only) == std::string::npos) continue;
            const auto r = time_shape(s, 1024, steps, halves_from_rows);
            rows.push_back(r);
            fmt::print("{:<26} {:>5} {:>6} {:>5} {:>10.3f} {:>10.3f} {:>14.3e} {:>11.0f} {:>11.0f}\n", s.name, s.T,
                       to_string(s.matmul), s.graphs ? "yes" : "no", r["ms_per_step"].get<double>(),
                       r["ms_per_step_pipelined"].get<double>(), r["tokens_per_s"].get<double>(),
                       r["session_mib"].get<double>(), r["device_mib"].get<double>());
        }
    }
    result["rows"] = rows;
    if (do_learn) {
        nlohmann::json runs = nlohmann::json::array();
        for (EigRange eig : {EigRange::signed_unit, EigRange::unit}) {
            runs.push_back(learn(eig, learn_steps, lr, 1));
            const auto& r = runs.back();
            fmt::print("learn parity, deltanet eig {}: best scaled accuracy {:.4f}, solved after {:.1f} s ({} steps, {:.1f} s run)\n",
                       to_string(eig), r["best_scaled_accuracy"].get<double>(), r["seconds_to_solve"].get<double>(),
                       r["steps_run"].get<std::size_t>(), r["seconds"].get<double>());
        }
        result["learn"] = runs;
    }
    write_file_atomically(out, result.dump(2) + "\n");
    return 0;
}
