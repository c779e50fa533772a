// Sweeps: spec expansion, stable ids, shards, the scheduler (resume, failures, slots) and the
// summary table, on synthetic results (the real trainer runs in tests/cli/test_cli_sweep.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "statetrack/automata/error.hpp"
#include "statetrack/automata/files.hpp"
#include "statetrack/gpu/sweep.hpp"
#include "scratch_dir.hpp"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace statetrack;
using namespace statetrack::gpu;

json spec_of(json keys) {
    keys["format"] = "statetrack.sweep/1";
    return keys;
}

const json paper_like = spec_of({{"task", {"zoo:parity", "zoo:mod:3"}},
                                 {"model", {"deltanet", "mamba"}},
                                 {"eig", {"0,1", "-1,1"}},
                                 {"seed", {1, 2, 3}},
                                 {"lr", 1e-3}});

TEST(Sweep, ExpandsTheProductOnceEach) {
    const SweepSpec spec = parse_sweep_spec(paper_like, "spec.json");
    ASSERT_EQ(spec.runs.size(), 2u * 2 * 2 * 3);
    std::set<std::string> combos, ids;
    for (const auto& run : spec.runs) {
        ids.insert(run.id);
        combos.insert(run.config["task"].get<std::string>() + run.config["model"].get<std::string>() +
                      run.config["eig"].get<std::string>() + run.config["seed"].dump());
        EXPECT_EQ(run.config["lr"], 1e-3);
        EXPECT_EQ(run.config["d_model"], 16);  // defaults are filled in
        EXPECT_EQ(run.config["label"], "final");
        EXPECT_EQ(run.config.size(), sweep_keys().size());
    }
    EXPECT_EQ(combos.size(), spec.runs.size());
    EXPECT_EQ(ids.size(), spec.runs.size());
    EXPECT_TRUE(std::is_sorted(spec.runs.begin(), spec.runs.end(), [](auto& a, auto& b) { return a.id < b.id; }));
}

// The CUDA backend's options reach the trainer's command line of CUDA runs only, in the trainer's
// spelling; the default (chunked, tf32) gives the same run id as a spec that does not name them.
TEST(Sweep, CudaOptionsArePassedToCudaRunsOnly) {
    const SweepSpec plain = parse_sweep_spec(spec_of({{"task", "zoo:parity"}}), "spec.json");
    const SweepSpec spec = parse_sweep_spec(
        spec_of({{"task", "zoo:parity"}, {"cuda_recurrences", {"steps", "chunked"}}, {"matmul", "bf16"}, {"cuda_words", "padded"}}),
        "spec.json");
    ASSERT_EQ(spec.runs.size(), 2u);
    auto value_after = [](const std::vector<std::string>& args, const std::string& flag) -> std::string {
        const auto at = std::find(args.begin(), args.end(), flag);
        return at == args.end() || at + 1 == args.end() ? "(absent)" : *(at + 1);
    };
    std::set<std::string> recurrences;
    for (const auto& run : spec.runs) {
        const auto cuda = train_arguments(run, "out", "cuda"), cpu = train_arguments(run, "out", "cpu");
        recurrences.insert(value_after(cuda, "--cuda-recurrences"));
        EXPECT_EQ(value_after(cuda, "--matmul"), "bf16");
        EXPECT_EQ(value_after(cuda, "--cuda-words"), "padded");
        EXPECT_EQ(value_after(cpu, "--cuda-recurrences"), "(absent)");
        EXPECT_EQ(value_after(cpu, "--cuda-words"), "(absent)");
        EXPECT_EQ(value_after(cpu, "--matmul"), "(absent)");
    }
    EXPECT_EQ(recurrences, (std::set<std::string>{"chunked", "steps"}));
    const SweepSpec chunked = parse_sweep_spec(
        spec_of({{"task", "zoo:parity"}, {"cuda_recurrences", "chunked"}, {"cuda_words", "packed"}}), "spec.json");
    EXPECT_EQ(chunked.runs.front().id, plain.runs.front().id);
}

TEST(Sweep, GridsAreAUnionWithoutDuplicates) {
    json spec = spec_of({{"task", "zoo:mod:3"}, {"eig", "-1,1"}, {"seed", {1, 2}}});
    spec["grid"] = {{{"model", "deltanet"}, {"layers", {1, 2}}},
                    {{"model", "deltaproduct:2"}, {"layers", 1}},
                    {{"model", "deltanet"}, {"layers", 1}}};  // repeats runs of the first grid
    const SweepSpec s = parse_sweep_spec(spec, "spec.json");
    ASSERT_EQ(s.runs.size(), (2u + 1) * 2);
    std::map<std::string, int> per_model;
    for (const auto& run : s.runs) per_model[run.config["model"].get<std::string>() + "/L" + run.config["layers"].dump()]++;
    EXPECT_EQ(per_model, (std::map<std::string, int>{{"deltanet/L1", 2}, {"deltanet/L2", 2}, {"deltaproduct:2/L1", 2}}));
}

TEST(Sweep, IdsAreStableAndDependOnlyOnTheConfiguration) {
    const json a = spec_of({{"task", "zoo:parity"}, {"model", "deltanet"}, {"lr", 0.001}, {"seed", 2}, {"d_model", 16}});
    // Other key order, another spelling of the same number, a default given explicitly or left out.
    const json b = spec_of({{"seed", 2}, {"lr", 1e-3}, {"task", "zoo:parity"}, {"eig", "-1,1"}});
    const std::string id = parse_sweep_spec(a, "a").runs.at(0).id;
    EXPECT_EQ(id, parse_sweep_spec(b, "b").runs.at(0).id);
    // The id of this configuration is part of the results format: results merged across versions rely on it.
    EXPECT_EQ(id, sweep_run_id(parse_sweep_spec(a, "a").runs.at(0).config));
    // The exact id is a format contract: results committed under results/ are found again by it.
    EXPECT_EQ(id, "parity-deltanet-eigm11-L1-lr0.001-s2-af6b201ea8");
    for (char c : id) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_') << id;
    // Any key that changes training changes the id, even one the readable part leaves out.
    const json changes = {{"steps", 999}, {"d_model", 8}, {"batch", 64}, {"test_len", "40:128"}, {"clip", 0.5}};
    for (const auto& [key, value] : changes.items()) {
        json c = a;
        c[key] = value;
        EXPECT_NE(parse_sweep_spec(c, "c").runs.at(0).id, id) << key;
    }
}

TEST(Sweep, ShardsPartitionTheRunsExactly) {
    const auto runs = parse_sweep_spec(paper_like, "spec.json").runs;
    for (std::size_t n = 1; n <= 7; ++n) {
        std::multiset<std::string> seen;
        std::size_t smallest = runs.size(), largest = 0;
        for (std::size_t i = 0; i < n; ++i) {
            const auto part = select_shard(runs, {i, n});
            smallest = std::min(smallest, part.size()), largest = std::max(largest, part.size());
            for (const auto& r : part) seen.insert(r.id);
        }
        std::multiset<std::string> all;
        for (const auto& r : runs) all.insert(r.id);
        EXPECT_EQ(seen, all) << n << " shards";
        EXPECT_LE(largest - smallest, 1u);
    }
    EXPECT_EQ(parse_shard("2/5", "--shard").index, 2u);
    for (const char* bad : {"5/5", "1", "a/2", "0/0", "-1/3", "1/2/3", ""}) EXPECT_THROW(parse_shard(bad, "--shard"), InputError) << bad;
}

TEST(Sweep, ShardFromSlurmArrayVariables) {
    std::map<std::string, std::string> env;
    auto get = [&](const char* name) -> const char* {
        auto it = env.find(name);
        return it == env.end() ? nullptr : it->second.c_str();
    };
    EXPECT_FALSE(shard_from_environment(get).has_value());
    env = {{"SLURM_ARRAY_TASK_ID", "3"}, {"SLURM_ARRAY_TASK_COUNT", "4"}};
    EXPECT_EQ(shard_from_environment(get)->index, 3u);
    env["SLURM_ARRAY_TASK_MIN"] = "1";  // --array=1-4
    EXPECT_EQ(shard_from_environment(get)->index, 2u);
    EXPECT_EQ(shard_from_environment(get)->count, 4u);
    env["SLURM_ARRAY_TASK_ID"] = "5";
    EXPECT_THROW(shard_from_environment(get), InputError);
    env["SLURM_ARRAY_TASK_ID"] = "x";
    EXPECT_THROW(shard_from_environment(get), InputError);
}

TEST(Sweep, BadSpecsNameTheJsonPointer) {
    const std::vector<std::pair<json, std::string>> cases = {
        {spec_of({{"task", "zoo:parity"}, {"lrs", {1e-3}}}), "/lrs"},
        {spec_of({{"task", "zoo:parity"}, {"seed", json::array()}}), "/seed"},
        {spec_of({{"task", "zoo:parity"}, {"eig", {"0,1", "-2,1"}}}), "/eig/1"},
        {spec_of({{"task", "zoo:parity"}, {"steps", "1000"}}), "/steps"},
        {spec_of({{"task", "zoo:parity"}, {"layers", -1}}), "/layers"},
        {spec_of({{"task", "zoo:parity"}, {"batch", 2.5}}), "/batch"},
        {spec_of({{"task", "zoo:parity"}, {"model", {"deltanet", "gru"}}}), "/model/1"},
        {spec_of({{"task", {"zoo:parity", "zoo:nosuchlanguage"}}}), "/task/1"},
        {spec_of({{"model", "deltanet"}}), "/"},  // no task
        {json{{"task", "zoo:parity"}}, "/format"},
        {spec_of({{"task", "zoo:parity"}, {"grid", json::array()}}), "/grid"},
        {spec_of({{"task", "zoo:parity"}, {"grid", {{{"foo", 1}}}}}), "/grid/0/foo"},
        {spec_of({{"task", "zoo:parity"}, {"grid", {{{"lr", {0.1, -1}}}}}}), "/grid/0"},  // lr must be > 0
        {spec_of({{"task", "zoo:parity"}, {"d_model", 10}, {"heads", 3}}), "/"},            // heads must divide d_model
        {spec_of({{"task", "zoo:parity"}, {"test_len", "9:3"}}), "/test_len"},
        {spec_of({{"task", "zoo:parity"}, {"cuda_recurrences", {"steps", "chunks"}}}), "/cuda_recurrences/1"},
        {spec_of({{"task", "zoo:parity"}, {"cuda_words", "squeezed"}}), "/cuda_words"},
        {json::array({1, 2}), "/"},
    };
    for (const auto& [spec, pointer] : cases) {
        try {
            parse_sweep_spec(spec, "spec.json");
            ADD_FAILURE() << "accepted " << spec.dump();
        } catch (const InputError& e) {
            EXPECT_EQ(e.file(), "spec.json");
            EXPECT_TRUE(e.place().starts_with(pointer)) << spec.dump() << " -> " << e.what();
        }
    }
    // A product that is too large is refused before anything is built.
    json huge = spec_of({{"task", "zoo:parity"}});
    json seeds = json::array();
    for (int i = 1; i <= 1000; ++i) seeds.push_back(i);
    huge["seed"] = seeds, huge["steps"] = seeds;
    EXPECT_THROW(parse_sweep_spec(huge, "spec.json"), LimitError);
}

// A temporary folder per test.
fs::path fresh_dir(const std::string& name) { return statetrack::testing::fresh_scratch_dir("test_sweep_" + name, true); }

json synthetic_summary(double scaled, const std::vector<std::pair<std::size_t, double>>& per_length, std::size_t stopped = 10) {
    json lengths = json::array();
    for (const auto& [length, accuracy] : per_length) lengths.push_back({{"length", length}, {"words", 4}, {"accuracy", accuracy}});
    return {{"format", "statetrack.train-summary/1"},
            {"steps", 10},
            {"stopped_at_step", stopped},
            {"final", {{"scaled_accuracy", scaled}, {"chance", 0.5}, {"per_length", lengths}}}};
}

void write_json(const fs::path& path, const json& value) { write_file_atomically(path.string(), value.dump()); }

TEST(Sweep, SchedulerSkipsFinishedRunsAndRecordsFailures) {
    const fs::path dir = fresh_dir("scheduler");
    const auto runs = parse_sweep_spec(spec_of({{"task", "zoo:parity"}, {"seed", {1, 2, 3, 4, 5}}}), "s").runs;
    std::atomic<int> launched{0}, running{0}, most{0};
    std::string failing;  // this run's job exits with status 2
    const RunLauncher launch = [&](const SweepRun& run, const std::string& run_dir, std::size_t slot) {
        EXPECT_LT(slot, 3u);
        EXPECT_TRUE(fs::exists(fs::path(run_dir) / "run.json"));
        ++launched;
        most = std::max(most.load(), ++running);
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
        --running;
        if (run.id == failing) return 2;
        write_json(fs::path(run_dir) / "summary.json", synthetic_summary(0.5, {{40, 0.75}}));
        return 0;
    };
    SweepOutcome o = run_sweep(runs, dir.string(), 3, launch, false, nullptr);
    EXPECT_EQ(launched, 5);
    EXPECT_EQ(o.succeeded, 5u);
    EXPECT_GT(most, 1);  // the slots run at the same time
    EXPECT_LE(most, 3);
    for (const auto& r : runs) EXPECT_EQ(run_state((dir / r.id).string()), RunState::finished);

    launched = 0;
    o = run_sweep(runs, dir.string(), 3, launch, false, nullptr);  // resume: nothing left to do
    EXPECT_EQ(launched, 0);
    EXPECT_EQ(o.finished_before, 5u);

    // An interrupted run (no summary, or one written by --stop-at) runs again, and a failing job is recorded.
    fs::remove(dir / runs[1].id / "summary.json");
    write_json(dir / runs[2].id / "summary.json", synthetic_summary(0.5, {{40, 0.75}}, 4));
    failing = runs[2].id;
    o = run_sweep(runs, dir.string(), 2, launch, false, nullptr);
    EXPECT_EQ(launched, 2);
    EXPECT_EQ(o.succeeded, 1u);
    EXPECT_EQ(o.failed_ids, std::vector<std::string>{runs[2].id});
    EXPECT_EQ(run_state((dir / runs[2].id).string()), RunState::failed);
    std::ifstream in(dir / runs[2].id / "failed.json");
    EXPECT_EQ(json::parse(in)["exit_code"], 2);

    launched = 0;
    o = run_sweep(runs, dir.string(), 2, launch, false, nullptr);  // failures are skipped ...
    EXPECT_EQ(launched, 0);
    EXPECT_EQ(o.failed_before, 1u);
    failing.clear();
    o = run_sweep(runs, dir.string(), 2, launch, true, nullptr);  // ... unless retried
    EXPECT_EQ(launched, 1);
    EXPECT_EQ(o.succeeded, 1u);
    EXPECT_FALSE(fs::exists(dir / runs[2].id / "failed.json"));

    // A job that exits 0 without a complete summary, or throws, is a failure too.
    fs::remove(dir / runs[0].id / "summary.json");
    fs::remove(dir / runs[3].id / "summary.json");
    const RunLauncher silent = [&](const SweepRun& run, const std::string&, std::size_t) -> int {
        if (run.id == runs[3].id) throw std::runtime_error("cannot start");
        return 0;
    };
    o = run_sweep(runs, dir.string(), 1, silent, false, nullptr);
    EXPECT_EQ(o.failed, 2u);
    fs::remove_all(dir);
}

TEST(Sweep, ManifestMergesSpecsAndRuns) {
    const fs::path dir = fresh_dir("manifest");
    const SweepSpec a = parse_sweep_spec(spec_of({{"task", "zoo:parity"}, {"seed", {1, 2}}}), "a");
    const SweepSpec b = parse_sweep_spec(spec_of({{"task", "zoo:parity"}, {"seed", {2, 3}}}), "b");
    write_sweep_manifest(dir.string(), a);
    write_sweep_manifest(dir.string(), a);
    write_sweep_manifest(dir.string(), b);
    std::ifstream in(dir / "sweep.json");
    const json m = json::parse(in);
    EXPECT_EQ(m["specs"].size(), 2u);
    EXPECT_EQ(m["runs"].size(), 3u);
    write_file_atomically((dir / "sweep.json").string(), "{\"format\": \"other\"}");
    EXPECT_THROW(write_sweep_manifest(dir.string(), a), InputError);
    fs::remove_all(dir);
}

TEST(Sweep, OneJobPerGpuSlot) {
    using V = std::vector<std::string>;
    EXPECT_EQ(cuda_slot_devices(2, nullptr, 1), (V{"0", "1"}));
    EXPECT_EQ(cuda_slot_devices(2, nullptr, 2), (V{"0", "0", "1", "1"}));
    EXPECT_EQ(cuda_slot_devices(2, "2,3", 1), (V{"2", "3"}));  // the parent's own selection
    EXPECT_EQ(cuda_slot_devices(2, "GPU-aa,GPU-bb", 1), (V{"GPU-aa", "GPU-bb"}));
    EXPECT_EQ(cuda_slot_devices(1, "2,3", 1), (V{"0"}));  // a list that does not match the count: indices
    EXPECT_EQ(cuda_slot_devices(0, "", 1), V{});
}

TEST(Sweep, LengthBuckets) {
    const auto b = default_length_buckets(40, 256);
    ASSERT_EQ(b.size(), 3u);
    EXPECT_EQ(b[0].min, 40u);
    EXPECT_EQ(b[0].max, 64u);
    EXPECT_EQ(b[1].min, 65u);
    EXPECT_EQ(b[1].max, 128u);
    EXPECT_EQ(b[2].min, 129u);
    EXPECT_EQ(b[2].max, 256u);
    EXPECT_EQ(default_length_buckets(7, 8).size(), 1u);
    EXPECT_EQ(default_length_buckets(64, 100).front().max, 100u);
    const auto p = parse_length_buckets("40:64,65");
    ASSERT_EQ(p.size(), 2u);
    EXPECT_EQ(p[1].min, 65u);
    EXPECT_EQ(p[1].max, 65u);
    for (const char* bad : {"", "40:64,", "9:3", "x"}) EXPECT_THROW(parse_length_buckets(bad), InputError) << bad;
}

TEST(Sweep, SummaryTakesBestAndMedianOverSeeds) {
    const fs::path dir = fresh_dir("summary");
    const auto runs =
        parse_sweep_spec(spec_of({{"task", "zoo:parity"}, {"model", {"deltanet", "mamba"}}, {"seed", {1, 2, 3}}}), "s").runs;
    // deltanet seeds 1..3: scaled 0.2, 1.0, 0.5 -> best 1.0, median 0.5; mamba: 0.1, 0.3 and one unfinished.
    const std::map<std::pair<std::string, int>, double> scaled = {
        {{"deltanet", 1}, 0.2}, {{"deltanet", 2}, 1.0}, {{"deltanet", 3}, 0.5}, {{"mamba", 1}, 0.1}, {{"mamba", 2}, 0.3}};
    for (const auto& run : runs) {
        fs::create_directories(dir / run.id);
        write_json(dir / run.id / "run.json", {{"id", run.id}, {"config", run.config}});
        const auto key = std::make_pair(run.config["model"].get<std::string>(), run.config["seed"].get<int>());
        if (!scaled.count(key)) continue;
        // accuracies per length: bucket 40-64 has (0.5 + a) / 2, bucket 65-128 has a; chance 0.5
        const double a = 0.5 + scaled.at(key) / 2;
        write_json(dir / run.id / "summary.json", synthetic_summary(scaled.at(key), {{40, 0.5}, {64, a}, {100, a}}));
    }
    fs::create_directories(dir / "not-a-run");  // folders without run.json are ignored
    const json s = summarize_sweep(dir.string(), {"seed"}, {});
    ASSERT_EQ(s["buckets"].size(), 2u);  // 40..64, 65..100
    EXPECT_EQ(s["buckets"][1]["max"], 100);
    EXPECT_EQ(s["columns"], json::array({"model"}));
    EXPECT_EQ(s["fixed"]["task"], "zoo:parity");
    ASSERT_EQ(s["groups"].size(), 2u);
    const json& d = s["groups"][0];
    EXPECT_EQ(d["config"]["model"], "deltanet");
    EXPECT_EQ(d["finished"], 3);
    EXPECT_DOUBLE_EQ(d["best"].get<double>(), 1.0);
    EXPECT_DOUBLE_EQ(d["median"].get<double>(), 0.5);
    // bucket 40-64: mean accuracy (0.5 + 0.5 + s/2)/2, scaled: s/2
    EXPECT_DOUBLE_EQ(d["buckets"][0]["best"].get<double>(), 0.5);
    EXPECT_DOUBLE_EQ(d["buckets"][0]["median"].get<double>(), 0.25);
    EXPECT_DOUBLE_EQ(d["buckets"][1]["best"].get<double>(), 1.0);
    const json& m = s["groups"][1];
    EXPECT_EQ(m["config"]["model"], "mamba");
    EXPECT_EQ(m["finished"], 2);
    EXPECT_EQ(m["pending"], 1);
    EXPECT_DOUBLE_EQ(m["median"].get<double>(), 0.2);  // even count: mean of the middle two
    EXPECT_DOUBLE_EQ(m["best"].get<double>(), 0.3);

    const std::string md = sweep_summary_markdown(s);
    EXPECT_NE(md.find("| model | runs | scaled (best / median) | 40-64 | 65-100 |"), std::string::npos) << md;
    EXPECT_NE(md.find("| deltanet | 3/3 | 1.000 / 0.500 | 0.500 / 0.250 | 1.000 / 0.500 |"), std::string::npos) << md;
    EXPECT_NE(md.find("| mamba | 2/3 | 0.300 / 0.200 |"), std::string::npos) << md;

    // Over nothing: one row per run; explicit buckets; unknown keys are bad input.
    EXPECT_EQ(summarize_sweep(dir.string(), {}, {}).at("groups").size(), 6u);
    EXPECT_EQ(summarize_sweep(dir.string(), {"seed", "model"}, {{40, 40}}).at("groups").size(), 1u);
    EXPECT_DOUBLE_EQ(summarize_sweep(dir.string(), {"seed", "model"}, {{40, 40}})["groups"][0]["buckets"][0]["best"].get<double>(), 0.0);
    EXPECT_THROW(summarize_sweep(dir.string(), {"seeds"}, {}), InputError);
    EXPECT_THROW(summarize_sweep((dir / "missing").string(), {"seed"}, {}), InputError);
    fs::remove_all(dir);
}

}  // namespace
