// bench_step_timeline: where a training step's wall time goes on the GPU. ncu times each kernel
// alone (serialised, caches flushed); here the steps run as training runs them (one CUDA graph a
// step, the next begun before the last ends, the weight gradients on their side stream) and CUPTI's
// activity records give every kernel's start and end. Per step: the period (one AdamW's end to the
// next), the kernels' summed time, the time at least one kernel runs (their union: the SMs at
// work) and the idle rest, during which the step waits on copies, memsets or launches; the longest
// idle gaps, with what comes before and after them; the kernel time by kernel; with --list, one
// step's activities in order.
//
//   bench_step_timeline [--model M (deltanet)] [--matmul P (tf32)] [--words MIN] [--layers N (2)]
//                       [--steps N (20)] [--list] [--out FILE (bench_step_timeline.json)]
//
// Models of d_model 128, 4 heads, batch 1024 (2 layers unless --layers), at T = 40 and 256 (words
// of lengths MIN..T with --words, as training's). Without a GPU it says so and exits 0. CUDA builds
// only (CUPTI).
#include <cupti.h>
#include <cxxabi.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "statetrack/automata/error.hpp"
#include "statetrack/automata/files.hpp"
#include "statetrack/gpu/cuda_backend.hpp"
#include "statetrack/gpu/random.hpp"
#include "steps.hpp"
#include "words.hpp"

using namespace statetrack;
using namespace statetrack::gpu;

namespace {

// One kernel, copy or memset on the device, times in ns of the GPU's clock.
struct Activity {
    std::string name;
    std::uint64_t start = 0, end = 0;
    std::uint32_t stream = 0;
    bool kernel = false;
};

// CUPTI hands its records over in buffers through two C callbacks (on a thread of its own); they
// append here.
std::mutex recorded_mutex;
std::vector<Activity> recorded;
std::size_t dropped = 0;  // records CUPTI could not keep

void check_cupti(CUptiResult r, const char* what) {
    if (r == CUPTI_SUCCESS) return;
    const char* text = nullptr;
    cuptiGetResultString(r, &text);
    throw std::runtime_error(fmt::format("{}: {}", what, text ? text : "unknown CUPTI error"));
}

void CUPTIAPI buffer_requested(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records) {
    constexpr std::size_t bytes = 8 << 20;
    *buffer = static_cast<std::uint8_t*>(std::aligned_alloc(8, bytes));
    *size = *buffer ? bytes : 0;
    *max_records = 0;  // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext context, std::uint32_t stream, std::uint8_t* buffer, std::size_t,
                               std::size_t valid) {
    const std::lock_guard lock(recorded_mutex);
    CUpti_Activity* record = nullptr;
    while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
        if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
            const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
            recorded.push_back({k->name ? k->name : "?", k->start, k->end, k->streamId, true});
        } else if (record->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
            const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
            recorded.push_back({fmt::format("[copy {} bytes]", m->bytes), m->start, m->end, m->streamId});
        } else if (record->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
            const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
            recorded.push_back({fmt::format("[memset {} bytes]", m->bytes), m->start, m->end, m->streamId});
        }
    }
    std::size_t lost = 0;
    if (cuptiActivityGetNumDroppedRecords(context, stream, &lost) == CUPTI_SUCCESS) dropped += lost;
    std::free(buffer);
}

const CUpti_ActivityKind traced[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                     CUPTI_ACTIVITY_KIND_MEMSET};

// A kernel's name without its template arguments' noise, short enough for a table.
std::string short_name(std::string n, std::size_t width = 64) {
    int status = 0;
    if (char* plain = abi::__cxa_demangle(n.c_str(), nullptr, nullptr, &status)) {
        if (status == 0) n = plain;
        std::free(plain);
    }
    for (const std::string noise : {"void ", "(anonymous namespace)::", "statetrack::gpu::cuda::", "statetrack::"})
        for (std::size_t at; (at = n.find(noise)) != std::string::npos;) n.erase(at, noise.size());
    if (const auto paren = n.find('('); paren != std::string::npos && n.rfind("[", 0) != 0) n.resize(paren);
    return n.size() > width ? n.substr(0, width) : n;
}

struct Gap {
    double us;
    std::string before, after;
};
struct StepTimes {
    double period_us = 0, kernel_us = 0, busy_us = 0;
    std::size_t activities = 0;
    std::vector<Gap> gaps;           // idle intervals, longest first
    std::vector<Activity> in_order;  // by start
};

// The activities of one step (start after `from`, up to its AdamW ending at `to`; the next step's
// upload, which runs beside this step's kernels, is among them). Busy: some kernel runs; the gaps
// between kernels are named by the activities before and after them.
StepTimes analyse(std::vector<Activity> acts, std::uint64_t from, std::uint64_t to) {
    std::sort(acts.begin(), acts.end(), [](const Activity& a, const Activity& b) { return a.start < b.start; });
    StepTimes s;
    s.period_us = double(to - from) / 1e3;
    s.activities = acts.size();
    std::uint64_t covered = from;  // the union of the kernels' [start, end) so far reaches here
    std::string last = "(the step before)";
    for (const Activity& a : acts) {
        if (!a.kernel) {
            if (a.end > covered) last = short_name(a.name);
            continue;
        }
        s.kernel_us += double(a.end - a.start) / 1e3;
        if (a.start > covered) s.gaps.push_back({double(a.start - covered) / 1e3, last, short_name(a.name)});
        const std::uint64_t lo = std::max(a.start, covered);
        if (a.end > lo) s.busy_us += double(a.end - lo) / 1e3, covered = a.end, last = short_name(a.name);
    }
    std::sort(s.gaps.begin(), s.gaps.end(), [](const Gap& a, const Gap& b) { return a.us > b.us; });
    s.in_order = std::move(acts);
    return s;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
}

nlohmann::json trace_shape(const std::string& model, MatmulPrecision matmul, std::size_t layers, std::size_t T,
                           std::size_t shortest, std::size_t steps, bool list) {
    ModelConfig c;
    parse_model_name(model, c);
    c.eig = EigRange::signed_unit;
    c.layers = layers, c.d_model = 128, c.heads = 4, c.vocab = 2, c.classes = 2;
    validate(c);
    CudaSession session = make_cuda_session(c, {matmul, true, false});
    const auto layout = parameter_layout(c);
    std::vector<float> w(layout.total);
    init_parameters<float>(c, layout, 1, w);
    upload_parameters(session, w);
    AdamWOptions o;
    std::vector<Batch> batches;
    for (std::size_t i = 0; i < 4; ++i) batches.push_back(bench::random_words(1024, T, shortest, 2, 2, i));
    bench::warm_up_both_slots(session, batches, o);  // sizes both slots' buffers, captures their graphs
    {
        const std::lock_guard lock(recorded_mutex);
        recorded.clear(), dropped = 0;
    }
    for (const auto kind : traced) check_cupti(cuptiActivityEnable(kind), "cuptiActivityEnable");
    bench::steps_back_to_back(session, batches, o, steps, 0, 16);
    for (const auto kind : traced) check_cupti(cuptiActivityDisable(kind), "cuptiActivityDisable");
    check_cupti(cuptiActivityFlushAll(1), "cuptiActivityFlushAll");
    const std::lock_guard lock(recorded_mutex);
    if (dropped) throw std::runtime_error(fmt::format("CUPTI dropped {} activity records", dropped));

    // Steps end at their AdamW; the first traced step's start is unknown, so steps 2.. are analysed.
    std::vector<std::uint64_t> ends;
    for (const Activity& a : recorded)
        if (a.name.find("adamw_kernel") != std::string::npos) ends.push_back(a.end);
    std::sort(ends.begin(), ends.end());
    if (ends.size() < 3) throw std::runtime_error(fmt::format("{} steps traced: too few AdamW kernels seen", ends.size()));
    std::vector<StepTimes> per_step;
    for (std::size_t i = 1; i < ends.size(); ++i) {
        std::vector<Activity> acts;
        for (const Activity& a : recorded)
            if (a.start > ends[i - 1] && a.start <= ends[i]) acts.push_back(a);
        per_step.push_back(analyse(acts, ends[i - 1], ends[i]));
    }
    std::vector<double> periods, kernel, busy;
    for (const auto& s : per_step) periods.push_back(s.period_us), kernel.push_back(s.kernel_us), busy.push_back(s.busy_us);
    const double period = median(periods);
    // the step whose period is the median's, for its gaps and its list
    const StepTimes& typical = *std::min_element(per_step.begin(), per_step.end(), [&](const auto& a, const auto& b) {
        return std::abs(a.period_us - period) < std::abs(b.period_us - period);
    });
    std::size_t small_gaps = 0;
    double gap_sum = 0;
    for (const Gap& g : typical.gaps) gap_sum += g.us, small_gaps += g.us < 5 ? 1 : 0;
    fmt::print("{} T {} {}{}: period {:.1f} us (median of {}), {} activities, kernels {:.1f} us summed, busy (a kernel "
               "runs) {:.1f} us, idle {:.1f} us in {} gaps ({} under 5 us)\n",
               model, T, to_string(matmul), shortest ? fmt::format(", words {}-{}", shortest, T) : "", period,
               per_step.size(), typical.activities, median(kernel), median(busy), period - median(busy),
               typical.gaps.size(), small_gaps);
    nlohmann::json gaps = nlohmann::json::array();
    for (std::size_t i = 0; i < typical.gaps.size(); ++i) {
        const Gap& g = typical.gaps[i];
        if (i < 8) fmt::print("  gap {:7.1f} us  after {}  before {}\n", g.us, g.before, g.after);
        gaps.push_back({{"us", g.us}, {"after", g.before}, {"before", g.after}});
    }
    // The step's kernel time by kernel (its launches summed), largest first: where to look next.
    std::map<std::string, std::pair<double, int>> by_name;
    for (const Activity& a : typical.in_order)
        if (a.kernel) {
            auto& [us, launches] = by_name[short_name(a.name)];
            us += double(a.end - a.start) / 1e3, ++launches;
        }
    std::vector<std::pair<std::string, std::pair<double, int>>> ranked(by_name.begin(), by_name.end());
    std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
    nlohmann::json by_kernel = nlohmann::json::array();
    for (std::size_t i = 0; i < ranked.size(); ++i) {
        const auto& [name, time] = ranked[i];
        if (i < 10)
            fmt::print("  kernel {:8.1f} us {:5.1f}% of the period, {} launch{}  {}\n", time.first,
                       100 * time.first / typical.period_us, time.second, time.second == 1 ? "" : "es", name);
        by_kernel.push_back({{"name", name}, {"us", time.first}, {"launches", time.second}});
    }
    nlohmann::json kernels = nlohmann::json::array();
    const std::uint64_t t0 = typical.in_order.empty() ? 0 : typical.in_order.front().start;
    if (list) fmt::print("  {:>9} {:>8} {:>7}  name\n", "start us", "us", "stream");
    for (const Activity& a : typical.in_order) {
        const double at = double(a.start - t0) / 1e3, us = double(a.end - a.start) / 1e3;
        if (list) fmt::print("  {:9.1f} {:8.1f} {:7}  {}\n", at, us, a.stream, short_name(a.name, 150));
        kernels.push_back({{"name", short_name(a.name)}, {"start_us", at}, {"us", us}, {"stream", a.stream}});
    }
    return {{"model", model},         {"matmul", to_string(matmul)}, {"layers", layers},
            {"T", T},                 {"shortest", shortest ? shortest : T},
            {"steps_analysed", per_step.size()}, {"period_us", period},
            {"kernel_us", median(kernel)}, {"busy_us", median(busy)}, {"idle_us", period - median(busy)},
            {"gaps", gaps},           {"by_kernel", by_kernel}, {"activities", kernels}};
}

}  // namespace

int main(int argc, char** argv) {
    std::string model = "deltanet", matmul_name = "tf32", out = "bench_step_timeline.json";
    std::size_t shortest = 0, steps = 20, layers = 2;
    bool list = false;
    const char* usage = "usage: bench_step_timeline [--model M] [--matmul P] [--words MIN] [--layers N] [--steps N] "
                        "[--list] [--out FILE]\n";
    MatmulPrecision matmul = MatmulPrecision::tf32;
    try {
        for (int i = 1; i < argc; ++i) {
            const std::string a = argv[i];
            auto value = [&] {
                if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
                return std::string(argv[++i]);
            };
            auto count = [&] {  // std::stoul would take "-1" as 2^64 - 1
                const std::string v = value();
                if (v.empty() || !std::isdigit(static_cast<unsigned char>(v[0])))
                    throw std::invalid_argument(a + ": '" + v + "' is not a count");
                return std::size_t(std::stoul(v));
            };
            if (a == "--model") model = value();
            else if (a == "--matmul") matmul_name = value();
            else if (a == "--words") shortest = count();
            else if (a == "--layers") layers = count();
            else if (a == "--steps") steps = count();
            else if (a == "--list") list = true;
            else if (a == "--out") out = value();
            else throw std::invalid_argument("unknown option " + a);
        }
        ModelConfig check;
        parse_model_name(model, check);
        matmul = parse_matmul_precision(matmul_name);
        if (shortest > 40) throw std::invalid_argument("--words: at most 40 (the shorter T)");
        if (steps < 3 || steps > 2000)
            throw std::invalid_argument("--steps: 3..2000 (the first traced step is not analysed)");
        if (layers < 1 || layers > 8) throw std::invalid_argument("--layers: 1..8");
        // the output's folder checked before minutes of tracing
        const auto folder = std::filesystem::absolute(out).parent_path();
        if (!std::filesystem::is_directory(folder) || access(folder.c_str(), W_OK) != 0)
            throw std::invalid_argument(fmt::format("--out {}: cannot write in {}", out, folder.string()));
    } catch (const std::exception& e) {  // std::stoul's too
        fmt::print(stderr, "bench_step_timeline: {}\n{}", e.what(), usage);
        return 2;
    }
    std::string why;
    if (!cuda_available(&why)) {
        fmt::print("bench_step_timeline: no CUDA device ({}); nothing to measure\n", why);
        return 0;
    }
    try {
        check_cupti(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed), "cuptiActivityRegisterCallbacks");
        nlohmann::json rows = nlohmann::json::array();
        for (std::size_t T : {40, 256}) rows.push_back(trace_shape(model, matmul, layers, T, shortest, steps, list));
        write_file_atomically(out, nlohmann::json{{"device", cuda_device_description()}, {"rows", rows}}.dump(2) + "\n");
    } catch (const InputError& e) {  // a model the CUDA backend refuses, before anything is measured
        fmt::print(stderr, "bench_step_timeline: {}\n", e.what());
        return 2;
    } catch (const std::exception& e) {
        fmt::print(stderr, "bench_step_timeline: {}\n", e.what());
        return 1;
    }
    return 0;
}
