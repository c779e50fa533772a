// Sweeps: spec expansion, stable run ids, shards, the job scheduler and the summary table
// (docs/sweeps.md).
#include "statetrack/gpu/sweep.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <cstring>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <ostream>
#include <thread>

#ifdef STATETRACK_HAVE_CUDA_BACKEND
#include <cuda_runtime_api.h>
#endif

#include "statetrack/automata/error.hpp"
#include "statetrack/automata/files.hpp"
#include "statetrack/automata/formats.hpp"
#include "statetrack/gpu/cuda_backend.hpp"
#include "statetrack/gpu/train_options.hpp"

namespace statetrack::gpu {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

using Kind = SweepKey::Kind;

// The trainer's options (cli/cmd_train.cpp) and their defaults. "task" has none: a spec must give it.
constexpr SweepKey keys[] = {
    {"task", "--task", Kind::text, nullptr},
    {"label", "--label", Kind::text, "\"final\""},
    {"target", "--target", Kind::text, "\"accept\""},
    {"model", "--model", Kind::text, "\"deltanet\""},
    {"eig", "--eig", Kind::text, "\"-1,1\""},
    {"layers", "--layers", Kind::count, "1"},
    {"d_model", "--d-model", Kind::count, "16"},
    {"heads", "--heads", Kind::count, "1"},
    {"mlp", "--mlp", Kind::count, "0"},
    {"batch", "--batch", Kind::count, "32"},
    {"steps", "--steps", Kind::count, "1000"},
    {"lr", "--lr", Kind::real, "0.003"},
    {"weight_decay", "--weight-decay", Kind::real, "0.1"},
    {"clip", "--clip", Kind::real, "1.0"},
    {"seed", "--seed", Kind::count, "1"},
    {"train_len", "--train-len", Kind::text, "\"3:40\""},
    {"test_len", "--test-len", Kind::text, "\"40:256\""},
    {"eval_every", "--eval-every", Kind::count, "0"},
    {"eval_words", "--eval-words", Kind::count, "16"},
    {"precision", "--precision", Kind::text, "\"fp32\""},
    {"matmul", "--matmul", Kind::text, "\"tf32\""},  // CUDA only: passed with --device cuda
    {"cuda_recurrences", "--cuda-recurrences", Kind::text, "\"chunked\""},  // CUDA only, as matmul
    {"cuda_words", "--cuda-words", Kind::text, "\"packed\""},              // CUDA only, as matmul
};
// Keys of a spec that are not trainer options.
constexpr const char* meta_keys[] = {"format", "name", "description", "grid"};
constexpr const char* spec_format = "statetrack.sweep/1";
// Documented limit (docs/sweeps.md): a product beyond this is almost surely a mistake.
constexpr std::size_t max_runs = 100'000;

const SweepKey* find_key(const std::string& name) {
    for (const auto& k : keys)
        if (name == k.key) return &k;
    return nullptr;
}

std::uint64_t fnv1a(const std::string& text) {
    std::uint64_t h = 0xcbf29ce484222325ull;
    for (unsigned char c : text) h = (h ^ c) * 0x100000001b3ull;
    return h;
}

// A value as the trainer sees it, in one canonical spelling (so "3e-3" and 0.003 give one id).
json normalize(const SweepKey& key, const json& value, const std::string& origin, const std::string& pointer) {
    auto bad = [&](const std::string& message) -> json { throw InputError(origin, pointer, message); };
    switch (key.kind) {
        case Kind::count:
            if (!value.is_number_unsigned() && !(value.is_number_integer() && value.get<std::int64_t>() >= 0))
                return bad(fmt::format("'{}' must be a non-negative integer, not {}", key.key, value.dump()));
            return value.get<std::uint64_t>();
        case Kind::real:
            if (!value.is_number() || !std::isfinite(value.get<double>()))
                return bad(fmt::format("'{}' must be a number, not {}", key.key, value.dump()));
            return value.get<double>();
        case Kind::text: break;
    }
    if (!value.is_string()) return bad(fmt::format("'{}' must be a string, not {}", key.key, value.dump()));
    const std::string text = value.get<std::string>();
    const std::string name = key.key;
    try {
        if (name == "model") {
            ModelConfig c;
            parse_model_name(text, c);
            return model_name(c);
        }
        if (name == "eig") return to_string(parse_eig_range(text));
        if (name == "label") return to_string(parse_label_mode(text));
        if (name == "target") return to_string(parse_target(text));
        if (name == "precision") return to_string(parse_precision(text));
        if (name == "matmul") return to_string(parse_matmul_precision(text));
        if (name == "cuda_recurrences") return cuda_recurrences_name(parse_cuda_recurrences(text));
        if (name == "cuda_words") return cuda_words_name(parse_cuda_words(text));
        if (name == "train_len" || name == "test_len") {
            const LengthRange r = parse_length_range(text, key.flag);
            return fmt::format("{}:{}", r.min, r.max);
        }
        if (name == "task") {
            automata::load_dfa(text);  // a missing file or an unknown zoo name is a bad spec now, not a failed run later
            return text;
        }
    } catch (const InputError& e) {
        throw InputError(origin, pointer, e.message());
    }
    return text;
}

std::string slug(std::string text) {
    if (text.starts_with("zoo:")) text = text.substr(4);
    else if (text.find('/') != std::string::npos || text.find('.') != std::string::npos) text = fs::path(text).stem().string();
    std::string out;
    for (char c : text) {
        if (std::isalnum(static_cast<unsigned char>(c)) || c == '.') out += c;
        else if (c != ':' && c != ',') out += '_';
    }
    return out.substr(0, 40);
}

// The trainer options of a run, for validate(): catches combinations no single value shows.
TrainOptions options_of(const json& config) {
    TrainOptions o;
    parse_model_name(config["model"].get<std::string>(), o.model);
    o.model.eig = parse_eig_range(config["eig"].get<std::string>());
    o.model.layers = config["layers"].get<std::size_t>();
    o.model.d_model = config["d_model"].get<std::size_t>();
    o.model.heads = config["heads"].get<std::size_t>();
    o.model.mlp_hidden = config["mlp"].get<std::size_t>();
    o.batch = config["batch"].get<std::size_t>();
    o.steps = config["steps"].get<std::size_t>();
    o.adamw.lr = config["lr"].get<double>();
    o.adamw.weight_decay = config["weight_decay"].get<double>();
    o.adamw.clip = config["clip"].get<double>();
    o.seed = config["seed"].get<std::uint64_t>();
    o.train_len = parse_length_range(config["train_len"].get<std::string>(), "--train-len");
    o.test_len = parse_length_range(config["test_len"].get<std::string>(), "--test-len");
    o.eval_every = config["eval_every"].get<std::size_t>();
    o.eval_words = config["eval_words"].get<std::size_t>();
    o.precision = parse_precision(config["precision"].get<std::string>());
    o.out_dir = "-";
    return o;
}

std::string flag_to_key(const std::string& flag) {
    for (const auto& k : keys)
        if (flag == k.flag) return k.key;
    return flag;
}

// The values of one key in one grid, and where they came from (for error messages).
struct Axis {
    const SweepKey* key;
    std::vector<json> values;
};

void expand_grid(const json& grid, const std::string& grid_pointer, const std::string& origin,
                 std::map<std::string, SweepRun>& runs) {
    std::vector<Axis> axes;
    for (const auto& k : keys) {
        const std::string pointer = grid_pointer + "/" + k.key;
        Axis axis{&k, {}};
        if (!grid.contains(k.key)) {
            if (!k.default_value) throw InputError(origin, grid_pointer.empty() ? "/" : grid_pointer, fmt::format("'{}' is required", k.key));
            axis.values.push_back(normalize(k, json::parse(k.default_value), origin, pointer));
        } else if (const json& v = grid.at(k.key); v.is_array()) {
            if (v.empty()) throw InputError(origin, pointer, fmt::format("the list of '{}' values is empty", k.key));
            for (std::size_t i = 0; i < v.size(); ++i) axis.values.push_back(normalize(k, v[i], origin, fmt::format("{}/{}", pointer, i)));
        } else {
            axis.values.push_back(normalize(k, v, origin, pointer));
        }
        axes.push_back(std::move(axis));
    }
    std::size_t total = 1;
    for (const auto& a : axes) {
        total *= a.values.size();
        if (total + runs.size() > max_runs)
            throw LimitError(origin, grid_pointer.empty() ? "/" : grid_pointer, fmt::format("the sweep has more than {} runs", max_runs));
    }
    std::vector<std::size_t> at(axes.size(), 0);
    for (std::size_t n = 0; n < total; ++n) {
        json config = json::object();
        for (std::size_t a = 0; a < axes.size(); ++a) config[axes[a].key->key] = axes[a].values[at[a]];
        try {
            validate(options_of(config));
        } catch (const InputError& e) {
            throw InputError(origin, grid_pointer.empty() ? "/" : grid_pointer,
                             fmt::format("'{}': {} (in the run {})", flag_to_key(e.place()), e.message(), config.dump()));
        }
        SweepRun run{sweep_run_id(config), config};
        if (auto [it, fresh] = runs.emplace(run.id, run); !fresh && it->second.config != config)
            throw InputError(origin, grid_pointer, fmt::format("two runs share the id {} (hash collision)", run.id));
        for (std::size_t a = axes.size(); a-- > 0;) {  // odometer: the last key varies fastest
            if (++at[a] < axes[a].values.size()) break;
            at[a] = 0;
        }
    }
}

void check_keys(const json& object, const std::string& pointer, const std::string& origin, bool top) {
    if (!object.is_object()) throw InputError(origin, pointer.empty() ? "/" : pointer, "expected a JSON object");
    for (const auto& item : object.items()) {
        const std::string& name = item.key();  // not a structured binding: clang 14 cannot capture one
        const bool meta = std::find_if(std::begin(meta_keys), std::end(meta_keys), [&](const char* m) { return name == m; }) !=
                          std::end(meta_keys);
        if (find_key(name) || (top && meta)) continue;
        std::vector<std::string> known;
        for (const auto& k : keys) known.push_back(k.key);
        throw InputError(origin, pointer + "/" + name,
                         fmt::format("unknown key '{}' (known: {}{})", name, fmt::join(known, ", "),
                                     top ? ", format, name, description, grid" : ""));
    }
}

double median(std::vector<double> values) {
    std::sort(values.begin(), values.end());
    const std::size_t n = values.size();
    return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

json read_json_file(const std::string& path) {
    const std::string text = read_text_file(path);
    try {
        return json::parse(text);
    } catch (const json::parse_error& e) {
        throw InputError(path, fmt::format("byte {}", e.byte), "not valid JSON");
    }
}

std::string tail_lines(const fs::path& path, std::size_t lines) {
    std::ifstream in(path);
    std::vector<std::string> all;
    for (std::string line; std::getline(in, line);) all.push_back(line);
    const std::size_t from = all.size() > lines ? all.size() - lines : 0;
    std::string out;
    for (std::size_t i = from; i < all.size(); ++i) out += all[i] + "\n";
    return out;
}

std::string format_value(const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

}  // namespace

std::span<const SweepKey> sweep_keys() { return keys; }

SweepSpec parse_sweep_spec(const json& spec, const std::string& origin) {
    check_keys(spec, "", origin, true);
    if (!spec.contains("format") || spec["format"] != spec_format)
        throw InputError(origin, "/format", fmt::format("expected \"format\": \"{}\"", spec_format));
    SweepSpec out;
    out.source = spec;
    if (spec.contains("name")) {
        if (!spec["name"].is_string()) throw InputError(origin, "/name", "expected a string");
        out.name = spec["name"].get<std::string>();
    }
    if (spec.contains("description") && !spec["description"].is_string()) throw InputError(origin, "/description", "expected a string");
    json base = spec;
    for (const char* m : meta_keys) base.erase(m);
    std::map<std::string, SweepRun> runs;
    if (!spec.contains("grid")) {
        expand_grid(base, "", origin, runs);
    } else {
        const json& grids = spec["grid"];
        if (!grids.is_array() || grids.empty()) throw InputError(origin, "/grid", "expected a non-empty list of objects");
        for (std::size_t g = 0; g < grids.size(); ++g) {
            const std::string pointer = fmt::format("/grid/{}", g);
            check_keys(grids[g], pointer, origin, false);
            json merged = base;
            for (const auto& [name, value] : grids[g].items()) merged[name] = value;
            expand_grid(merged, pointer, origin, runs);
        }
    }
    for (auto& [id, run] : runs) out.runs.push_back(std::move(run));
    return out;
}

SweepSpec read_sweep_spec(const std::string& path) { return parse_sweep_spec(read_json_file(path), path); }

std::string sweep_run_id(const json& config) {
    json differs = json::object();
    for (const auto& k : keys) {
        if (!config.contains(k.key)) continue;
        if (!k.default_value || config[k.key] != normalize(k, json::parse(k.default_value), "", "")) differs[k.key] = config[k.key];
    }
    const std::string eig = config.value("eig", std::string("-1,1")) == "0,1" ? "eig01" : "eigm11";
    return fmt::format("{}-{}-{}-L{}-lr{:g}-s{}-{:010x}", slug(config.value("task", std::string("task"))),
                       slug(config.value("model", std::string("deltanet"))), eig, config.value("layers", 1),
                       config.value("lr", 0.003), config.value("seed", std::uint64_t(1)), fnv1a(differs.dump()) >> 24);
}

std::vector<std::string> train_arguments(const SweepRun& run, const std::string& out_dir, const std::string& device) {
    std::vector<std::string> args{"train"};
    for (const auto& k : keys) {
        // the CUDA backend's own options go to CUDA runs only
        if (k.flag == std::string_view("--matmul") || k.flag == std::string_view("--cuda-recurrences") ||
            k.flag == std::string_view("--cuda-words"))
            if (device != "cuda") continue;
        args.push_back(k.flag);
        const json& v = run.config.at(k.key);
        args.push_back(k.kind == Kind::real ? fmt::format("{}", v.get<double>()) : format_value(v));
    }
    for (const char* a : {"--out", out_dir.c_str(), "--device", device.c_str(), "--quiet"}) args.push_back(a);
    return args;
}

Shard parse_shard(const std::string& text, const std::string& place) {
    const auto slash = text.find('/');
    Shard s;
    auto number = [&](std::string_view part, std::size_t& value) {
        const auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), value);
        return ec == std::errc() && ptr == part.data() + part.size() && !part.empty();
    };
    const std::string_view view = text;
    if (slash == std::string::npos || !number(view.substr(0, slash), s.index) || !number(view.substr(slash + 1), s.count) ||
        s.count == 0 || s.index >= s.count)
        throw InputError("argument", place, fmt::format("'{}' is not a shard i/N with 0 <= i < N", text));
    return s;
}

std::optional<Shard> shard_from_environment(const std::function<const char*(const char*)>& given) {
    auto get = given ? given : [](const char* name) -> const char* { return std::getenv(name); };
    const char* id = get("SLURM_ARRAY_TASK_ID");
    const char* count = get("SLURM_ARRAY_TASK_COUNT");
    if (!id || !count) return std::nullopt;
    std::size_t index = 0, n = 0, min = 0;
    const Shard parsed = parse_shard(fmt::format("0/{}", count), "SLURM_ARRAY_TASK_COUNT");
    n = parsed.count;
    const std::string min_text = get("SLURM_ARRAY_TASK_MIN") ? get("SLURM_ARRAY_TASK_MIN") : "0";
    const auto [p1, e1] = std::from_chars(id, id + std::strlen(id), index);
    const auto [p2, e2] = std::from_chars(min_text.data(), min_text.data() + min_text.size(), min);
    if (e1 != std::errc() || *p1 || e2 != std::errc() || p2 != min_text.data() + min_text.size() || index < min || index - min >= n)
        throw InputError("environment", "SLURM_ARRAY_TASK_ID",
                         fmt::format("task id '{}' (min {}) is not one of {} array tasks", id, min_text, n));
    return Shard{index - min, n};
}

std::vector<SweepRun> select_shard(const std::vector<SweepRun>& runs, Shard shard) {
    std::vector<SweepRun> out;
    for (std::size_t i = shard.index; i < runs.size(); i += shard.count) out.push_back(runs[i]);
    return out;
}

RunState run_state(const std::string& run_dir) {
    const fs::path dir(run_dir);
    std::error_code ec;
    if (fs::is_regular_file(dir / "summary.json", ec)) {
        std::ifstream in(dir / "summary.json");
        const json s = json::parse(in, nullptr, false);
        if (!s.is_discarded() && s.is_object() && s.value("format", "") == "statetrack.train-summary/1" &&
            s.contains("steps") && s.contains("stopped_at_step") && s["steps"] == s["stopped_at_step"] && s.contains("final"))
            return RunState::finished;
    }
    return fs::is_regular_file(dir / "failed.json", ec) ? RunState::failed : RunState::pending;
}

const char* to_string(RunState state) {
    switch (state) {
        case RunState::pending: return "pending";
        case RunState::finished: return "finished";
        case RunState::failed: return "failed";
    }
    return "?";
}

void write_sweep_manifest(const std::string& dir, const SweepSpec& spec) {
    const fs::path path = fs::path(dir) / "sweep.json";
    json manifest = {{"format", "statetrack.sweep-manifest/1"}, {"specs", json::array()}, {"runs", json::object()}};
    std::error_code ec;
    if (fs::exists(path, ec)) {
        const json old = read_json_file(path.string());
        if (!old.is_object() || old.value("format", "") != "statetrack.sweep-manifest/1" || !old["specs"].is_array() ||
            !old["runs"].is_object())
            throw InputError(path.string(), "/format", "not a statetrack.sweep-manifest/1 file (another tool's folder?)");
        manifest = old;
    }
    if (std::find(manifest["specs"].begin(), manifest["specs"].end(), spec.source) == manifest["specs"].end())
        manifest["specs"].push_back(spec.source);
    for (const auto& run : spec.runs) manifest["runs"][run.id] = run.config;
    write_file_atomically(path.string(), manifest.dump(2) + "\n");
}

SweepOutcome run_sweep(const std::vector<SweepRun>& runs, const std::string& dir, std::size_t slots,
                       const RunLauncher& launch, bool retry_failed, std::ostream* progress) {
    using Clock = std::chrono::steady_clock;
    SweepOutcome outcome;
    std::vector<const SweepRun*> todo;
    for (const auto& run : runs) {
        const RunState state = run_state((fs::path(dir) / run.id).string());
        if (state == RunState::finished) ++outcome.finished_before;
        else if (state == RunState::failed && !retry_failed) ++outcome.failed_before;
        else todo.push_back(&run);
    }
    std::mutex mutex;
    auto say = [&](const std::string& line) {
        if (!progress) return;
        std::lock_guard lock(mutex);
        *progress << line << std::flush;
    };
    say(fmt::format("sweep: {} runs: {} finished, {} failed earlier (skipped{}), {} to run on {} slot(s)\n", runs.size(),
                    outcome.finished_before, outcome.failed_before, outcome.failed_before ? "; --retry-failed runs them" : "",
                    todo.size(), slots));
    const auto start = Clock::now();
    std::atomic<std::size_t> next{0};
    std::size_t done = 0;
    auto worker = [&](std::size_t slot) {
        for (std::size_t i; (i = next++) < todo.size();) {
            const SweepRun& run = *todo[i];
            const fs::path run_dir = fs::path(dir) / run.id;
            std::error_code ec;
            fs::create_directories(run_dir, ec);
            fs::remove(run_dir / "failed.json", ec);
            write_file_atomically((run_dir / "run.json").string(),
                                  json{{"format", "statetrack.sweep-run/1"}, {"id", run.id}, {"config", run.config}}.dump(2) + "\n");
            const auto job_start = Clock::now();
            int code = -1;
            std::string message;
            try {
                code = launch(run, run_dir.string(), slot);
            } catch (const std::exception& e) {
                message = e.what();
            }
            const double seconds = std::chrono::duration<double>(Clock::now() - job_start).count();
            const bool ok = code == 0 && run_state(run_dir.string()) == RunState::finished;
            std::string result;
            if (ok) {
                std::ifstream in(run_dir / "summary.json");
                const json s = json::parse(in, nullptr, false);
                result = s.is_discarded() ? "" : fmt::format("scaled {:.3f}", s["final"].value("scaled_accuracy", 0.0));
            } else {
                const std::string log = tail_lines(run_dir / "train.log", 20);
                if (message.empty()) message = code == 0 ? "the job ended without a complete summary.json" : fmt::format("exit status {}", code);
                write_file_atomically((run_dir / "failed.json").string(),
                                      json{{"id", run.id}, {"exit_code", code}, {"message", message}, {"log_tail", log}}.dump(2) + "\n");
                result = "FAILED: " + message;
            }
            std::lock_guard lock(mutex);
            ++done;
            if (ok) ++outcome.succeeded;
            else ++outcome.failed, outcome.failed_ids.push_back(run.id);
            const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
            const double eta = elapsed / double(done) * double(todo.size() - done);
            if (progress)
                *progress << fmt::format("[{}/{}] {} {} ({:.1f} s, slot {}), ETA {:.0f} s\n", done, todo.size(), run.id, result,
                                         seconds, slot, eta)
                          << std::flush;
        }
    };
    const std::size_t threads = std::min(std::max<std::size_t>(slots, 1), todo.size());
    std::vector<std::thread> pool;
    for (std::size_t s = 0; s < threads; ++s) pool.emplace_back(worker, s);
    for (auto& t : pool) t.join();
    std::sort(outcome.failed_ids.begin(), outcome.failed_ids.end());
    return outcome;
}

std::size_t cuda_device_count() {
#ifdef STATETRACK_HAVE_CUDA_BACKEND
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();  // clear the sticky "no device" error for later calls
        return 0;
    }
    return static_cast<std::size_t>(n);
#else
    return 0;
#endif
}

std::vector<std::string> cuda_slot_devices(std::size_t devices, const char* visible, std::size_t jobs_per_device) {
    std::vector<std::string> names;
    for (std::string_view rest = visible ? visible : ""; !rest.empty();) {
        const std::size_t comma = std::min(rest.find(','), rest.size());
        if (comma > 0) names.emplace_back(rest.substr(0, comma));
        rest.remove_prefix(std::min(comma + 1, rest.size()));
    }
    if (names.size() != devices) {
        names.clear();
        for (std::size_t d = 0; d < devices; ++d) names.push_back(std::to_string(d));
    }
    std::vector<std::string> slots;
    for (const auto& name : names)
        for (std::size_t j = 0; j < jobs_per_device; ++j) slots.push_back(name);
    return slots;
}

std::vector<LengthBucket> parse_length_buckets(const std::string& text) {
    std::vector<LengthBucket> out;
    std::size_t from = 0;
    while (from <= text.size()) {
        const std::size_t comma = std::min(text.find(',', from), text.size());
        const LengthRange r = parse_length_range(text.substr(from, comma - from), "--buckets");
        out.push_back({r.min, r.max});
        from = comma + 1;
    }
    return out;
}

std::vector<LengthBucket> default_length_buckets(std::size_t min, std::size_t max) {
    std::vector<LengthBucket> out;
    for (std::size_t lo = min; lo <= max && lo > 0;) {
        std::size_t p = 1;
        while (p <= lo) p *= 2;
        out.push_back({lo, std::min(p, max)});
        lo = p + 1;
    }
    return out;
}

namespace {

// The fields of a run's summary.json that the summary reads: checked first, so that an edited or
// foreign file is exit 2 naming the field, not an exception or a float read as an integer.
void check_run_summary(const json& summary, const std::string& path) {
    const auto number = [](const json& o, const char* key) { return o.is_object() && o.contains(key) && o[key].is_number(); };
    if (!summary.is_object() || !summary.contains("final") || !number(summary["final"], "scaled_accuracy") ||
        !number(summary["final"], "chance"))
        throw InputError(path, "/final", "expected an object with numeric 'scaled_accuracy' and 'chance'");
    const json& per_length = summary["final"].value("per_length", json());
    if (!per_length.is_array()) throw InputError(path, "/final/per_length", "expected an array");
    for (std::size_t i = 0; i < per_length.size(); ++i)
        if (!per_length[i].is_object() || !per_length[i].contains("length") || !per_length[i]["length"].is_number_unsigned() ||
            !number(per_length[i], "accuracy"))
            throw InputError(path, fmt::format("/final/per_length/{}", i),
                             "expected an object with an unsigned integer 'length' and a numeric 'accuracy'");
}

}  // namespace

json summarize_sweep(const std::string& dir, const std::vector<std::string>& over, std::vector<LengthBucket> buckets) {
    for (const auto& key : over)
        if (!find_key(key)) throw InputError("argument", "--over", fmt::format("'{}' is not a sweep key", key));
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) throw InputError(dir, "DIR", "not a folder");
    struct Found {
        std::string id;
        json config, summary;  // summary: null unless finished
        RunState state;
    };
    std::vector<Found> found;
    for (const auto& entry : fs::directory_iterator(dir)) {
        const fs::path run_json = entry.path() / "run.json";
        if (!entry.is_directory() || !fs::is_regular_file(run_json, ec)) continue;
        const json r = read_json_file(run_json.string());
        if (!r.is_object() || !r.contains("id") || !r["config"].is_object())
            throw InputError(run_json.string(), "/config", "not a statetrack.sweep-run/1 file");
        Found f{r["id"].get<std::string>(), r["config"], nullptr, run_state(entry.path().string())};
        if (f.state == RunState::finished) {
            const std::string path = (entry.path() / "summary.json").string();
            f.summary = read_json_file(path);
            check_run_summary(f.summary, path);
        }
        found.push_back(std::move(f));
    }
    if (buckets.empty()) {
        std::size_t lo = SIZE_MAX, hi = 0;
        for (const auto& f : found)
            if (!f.summary.is_null())
                for (const auto& l : f.summary["final"]["per_length"]) {
                    lo = std::min(lo, l["length"].get<std::size_t>());
                    hi = std::max(hi, l["length"].get<std::size_t>());
                }
        if (hi > 0) buckets = default_length_buckets(lo, hi);
    }
    // Group by the configuration without the `over` keys; groups sorted by their values in key order.
    auto group_of = [&](const json& config) {
        json g = config;
        for (const auto& key : over) g.erase(key);
        return g;
    };
    auto before = [](const json& a, const json& b) {
        for (const auto& k : keys) {
            const json x = a.value(k.key, json()), y = b.value(k.key, json());
            if (x != y) return x < y;
        }
        return false;
    };
    std::vector<std::pair<json, std::vector<const Found*>>> groups;
    for (const auto& f : found) {
        const json g = group_of(f.config);
        auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& p) { return p.first == g; });
        if (it == groups.end()) groups.push_back({g, {&f}});
        else it->second.push_back(&f);
    }
    std::sort(groups.begin(), groups.end(), [&](const auto& a, const auto& b) { return before(a.first, b.first); });
    // Keys that differ between groups become columns; the others are listed once.
    json columns = json::array(), fixed = json::object();
    for (const auto& k : keys) {
        if (std::find(over.begin(), over.end(), k.key) != over.end()) continue;
        bool varies = false;
        for (const auto& [g, members] : groups) varies |= g.value(k.key, json()) != groups.front().first.value(k.key, json());
        if (varies) columns.push_back(k.key);
        else if (!groups.empty() && groups.front().first.contains(k.key)) fixed[k.key] = groups.front().first[k.key];
    }
    json rows = json::array();
    for (auto& [g, members] : groups) {
        std::sort(members.begin(), members.end(), [](const Found* a, const Found* b) { return a->id < b->id; });
        std::vector<double> scaled;
        std::vector<std::vector<double>> per_bucket(buckets.size());
        std::size_t finished = 0, failed = 0;
        std::string best_run;
        double best = -INFINITY;
        json ids = json::array();
        for (const Found* f : members) {
            ids.push_back(f->id);
            if (f->state == RunState::failed) ++failed;
            if (f->summary.is_null()) continue;
            ++finished;
            const json& final_eval = f->summary["final"];
            const double s = final_eval["scaled_accuracy"].get<double>(), chance = final_eval["chance"].get<double>();
            scaled.push_back(s);
            if (s > best) best = s, best_run = f->id;
            for (std::size_t b = 0; b < buckets.size(); ++b) {
                double sum = 0;
                std::size_t n = 0;
                for (const auto& l : final_eval["per_length"]) {
                    const auto length = l["length"].get<std::size_t>();
                    if (length >= buckets[b].min && length <= buckets[b].max) sum += l["accuracy"].get<double>(), ++n;
                }
                if (n) per_bucket[b].push_back((sum / double(n) - chance) / (1 - chance));
            }
        }
        auto stat = [](const std::vector<double>& v, bool best_of) -> json {
            if (v.empty()) return nullptr;
            return best_of ? *std::max_element(v.begin(), v.end()) : median(v);
        };
        json bucket_rows = json::array();
        for (std::size_t b = 0; b < buckets.size(); ++b)
            bucket_rows.push_back({{"min", buckets[b].min}, {"max", buckets[b].max}, {"runs", per_bucket[b].size()},
                                   {"best", stat(per_bucket[b], true)}, {"median", stat(per_bucket[b], false)}});
        rows.push_back({{"config", g},
                        {"runs", members.size()},
                        {"finished", finished},
                        {"failed", failed},
                        {"pending", members.size() - finished - failed},
                        {"best", stat(scaled, true)},
                        {"median", stat(scaled, false)},
                        {"best_run", best_run.empty() ? json(nullptr) : json(best_run)},
                        {"buckets", bucket_rows},
                        {"run_ids", ids}});
    }
    json bucket_list = json::array();
    for (const auto& b : buckets) bucket_list.push_back({{"min", b.min}, {"max", b.max}});
    return {{"format", "statetrack.sweep-summary/1"}, {"dir", dir},        {"over", over},     {"metric", "scaled_accuracy"},
            {"buckets", bucket_list},               {"columns", columns}, {"fixed", fixed}, {"groups", rows}};
}

std::string sweep_summary_markdown(const json& summary) {
    auto number = [](const json& v) { return v.is_null() ? std::string("-") : fmt::format("{:.3f}", v.get<double>()); };
    std::string md = fmt::format("# Sweep summary: {}\n\n", summary["dir"].get<std::string>());
    std::vector<std::string> over;
    for (const auto& o : summary["over"]) over.push_back(o.get<std::string>());
    md += fmt::format(
        "Scaled accuracy (accuracy - chance) / (1 - chance) at the final evaluation, best and median over {} "
        "(a cell is best / median); runs = finished/all.\n\n",
        over.empty() ? std::string("nothing (one run per row)") : fmt::format("{}", fmt::join(over, ", ")));
    if (!summary["fixed"].empty()) {
        std::vector<std::string> fixed;
        for (const auto& [k, v] : summary["fixed"].items()) fixed.push_back(fmt::format("{} {}", k, format_value(v)));
        md += fmt::format("Fixed: {}.\n\n", fmt::join(fixed, ", "));
    }
    std::vector<std::string> head, rule;
    for (const auto& c : summary["columns"]) head.push_back(c.get<std::string>());
    head.insert(head.end(), {"runs", "scaled (best / median)"});
    for (const auto& b : summary["buckets"]) head.push_back(fmt::format("{}-{}", b["min"].get<std::size_t>(), b["max"].get<std::size_t>()));
    for (std::size_t i = 0; i < head.size(); ++i) rule.push_back(i < summary["columns"].size() ? "---" : "---:");
    md += fmt::format("| {} |\n|{}|\n", fmt::join(head, " | "), fmt::join(rule, "|"));
    for (const auto& g : summary["groups"]) {
        std::vector<std::string> cells;
        for (const auto& c : summary["columns"]) cells.push_back(format_value(g["config"].value(c.get<std::string>(), json())));
        std::string runs = fmt::format("{}/{}", g["finished"].get<std::size_t>(), g["runs"].get<std::size_t>());
        if (g["failed"].get<std::size_t>()) runs += fmt::format(" ({} failed)", g["failed"].get<std::size_t>());
        cells.push_back(runs);
        cells.push_back(number(g["best"]) + " / " + number(g["median"]));
        for (const auto& b : g["buckets"]) cells.push_back(number(b["best"]) + " / " + number(b["median"]));
        md += fmt::format("| {} |\n", fmt::join(cells, " | "));
    }
    return md;
}

}  // namespace statetrack::gpu
