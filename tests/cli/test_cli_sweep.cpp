// End-to-end: `statetrack sweep` with tiny CPU runs of the real trainer: results layout, resume, shards
// (flag and Slurm variables), failures, the summary table, bad specs.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "run_statetrack.hpp"
#include "scratch_dir.hpp"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

using Result = statetrack::testing::CliOutcome;
const auto slurp = statetrack::testing::read_text;

// This process's scratch folder, removed when the process ends (fresh_scratch_dir).
fs::path scratch() {
    static const fs::path dir = statetrack::testing::fresh_scratch_dir("cli_sweep");
    fs::create_directories(dir);
    return dir;
}

Result run(const std::string& args, const std::string& env = "") {
    return statetrack::testing::run_statetrack(args, scratch(), env);
}

fs::path write_spec(const std::string& name, const json& spec) {
    const fs::path path = scratch() / (name + ".json");
    std::ofstream(path) << spec.dump(2);
    return path;
}

// Tiny runs of the real trainer: about 50 ms each.
json tiny_spec() {
    return {{"format", "statetrack.sweep/1"}, {"name", "tiny"},       {"task", "zoo:parity"}, {"model", "deltanet"},
            {"eig", {"0,1", "-1,1"}},        {"seed", {1, 2}},        {"d_model", 8},         {"heads", 2},
            {"batch", 4},                    {"steps", 6},            {"eval_every", 3},      {"eval_words", 2},
            {"train_len", "2:6"},            {"test_len", "7:9"},     {"lr", 0.003}};
}

std::vector<std::string> dry_run_ids(const std::string& args, const std::string& env = "") {
    const Result r = run("sweep " + args + " --dry-run --json", env);
    EXPECT_EQ(r.code, 0) << r.err;
    std::vector<std::string> ids;
    const json listed = json::parse(r.out);
    for (const auto& x : listed.at("runs")) ids.push_back(x.at("id").get<std::string>());
    return ids;
}

TEST(CliSweep, RunsResumesAndSummarizes) {
    const fs::path spec = write_spec("tiny", tiny_spec()), out = scratch() / "tiny";
    fs::remove_all(out);
    const auto ids = dry_run_ids(spec.string() + " --out " + out.string());
    ASSERT_EQ(ids.size(), 4u);
    EXPECT_FALSE(fs::exists(out));  // a dry run writes nothing

    Result r = run("sweep " + spec.string() + " --out " + out.string() + " --device cpu --jobs-per-device 2 --json");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(json::parse(r.out)["succeeded"], 4);
    EXPECT_NE(r.err.find("[4/4]"), std::string::npos) << r.err;  // progress on stderr
    const json manifest = json::parse(slurp(out / "sweep.json"));
    EXPECT_EQ(manifest["runs"].size(), 4u);
    for (const auto& id : ids) {
        const json summary = json::parse(slurp(out / id / "summary.json"));
        EXPECT_EQ(summary["stopped_at_step"], 6);
        EXPECT_EQ(summary["options"]["seed"], manifest["runs"][id]["seed"]);
        EXPECT_EQ(summary["options"]["model"]["eig"], manifest["runs"][id]["eig"]);
        EXPECT_TRUE(fs::exists(out / id / "metrics.jsonl"));
        EXPECT_TRUE(fs::exists(out / id / "run.json"));
    }

    // Resume: nothing runs again; a run interrupted after its checkpoint continues from it.
    const auto stamp = fs::last_write_time(out / ids[0] / "summary.json");
    r = run("sweep " + spec.string() + " --out " + out.string() + " --device cpu --json");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(json::parse(r.out)["succeeded"], 0);
    EXPECT_EQ(json::parse(r.out)["finished_before"], 4);
    EXPECT_EQ(fs::last_write_time(out / ids[0] / "summary.json"), stamp);
    fs::remove(out / ids[1] / "summary.json");
    r = run("sweep " + spec.string() + " --out " + out.string() + " --device cpu --json");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(json::parse(r.out)["succeeded"], 1);
    EXPECT_EQ(json::parse(slurp(out / ids[1] / "summary.json"))["resumed_from_step"], 6);

    // The table from the real summaries: best and median over the two seeds.
    r = run("sweep --summarize " + out.string() + " --json -o " + (scratch() / "tiny.md").string());
    ASSERT_EQ(r.code, 0) << r.err;
    const json table = json::parse(r.out);
    ASSERT_EQ(table["groups"].size(), 2u);  // one row per eigenvalue range
    EXPECT_EQ(table["columns"], json::array({"eig"}));
    for (const auto& g : table["groups"]) {
        std::vector<double> scaled;
        for (const auto& id : ids) {
            const json run_json = json::parse(slurp(out / id / "run.json"));
            if (run_json["config"]["eig"] == g["config"]["eig"])
                scaled.push_back(json::parse(slurp(out / id / "summary.json"))["final"]["scaled_accuracy"].get<double>());
        }
        ASSERT_EQ(scaled.size(), 2u);
        EXPECT_DOUBLE_EQ(g["best"].get<double>(), std::max(scaled[0], scaled[1]));
        EXPECT_DOUBLE_EQ(g["median"].get<double>(), (scaled[0] + scaled[1]) / 2);
    }
    const std::string md = slurp(scratch() / "tiny.md");
    EXPECT_NE(md.find("| eig | runs | scaled (best / median) | 7-8 | 9-9 |"), std::string::npos) << md;
    r = run("sweep --summarize " + out.string());
    EXPECT_EQ(r.code, 0);
    EXPECT_EQ(r.out, md);

    // A summary.json edited by hand (a length that is a huge float, then no per-length list) is
    // exit 2 naming the file and the field, and the table is not written.
    const fs::path edited = out / ids[2] / "summary.json";
    json broken = json::parse(slurp(edited));
    broken["final"]["per_length"][0]["length"] = 6.7e58;
    std::ofstream(edited) << broken.dump();
    const fs::path table_md = scratch() / "edited.md";
    r = run("sweep --summarize " + out.string() + " -o " + table_md.string());
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find(edited.string() + ": /final/per_length/0:"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(table_md));
    broken["final"].erase("per_length");
    std::ofstream(edited) << broken.dump();
    r = run("sweep --summarize " + out.string());
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_NE(r.err.find("/final/per_length"), std::string::npos) << r.err;
}

TEST(CliSweep, ShardsFromTheFlagAndFromSlurm) {
    json spec = tiny_spec();
    spec["seed"] = {1, 2, 3, 4, 5};
    const fs::path path = write_spec("shards", spec);
    const auto all = dry_run_ids(path.string());
    ASSERT_EQ(all.size(), 10u);
    std::multiset<std::string> union_of;
    for (int i = 0; i < 3; ++i) {
        const auto part = dry_run_ids(path.string() + " --shard " + std::to_string(i) + "/3");
        union_of.insert(part.begin(), part.end());
        // Slurm: --array=1-3 gives task ids 1..3 and SLURM_ARRAY_TASK_MIN=1
        const std::string env = "SLURM_ARRAY_TASK_ID=" + std::to_string(i + 1) + " SLURM_ARRAY_TASK_COUNT=3 SLURM_ARRAY_TASK_MIN=1";
        EXPECT_EQ(dry_run_ids(path.string(), env), part);
    }
    EXPECT_EQ(union_of, std::multiset<std::string>(all.begin(), all.end()));

    // Two shards run into one folder give the same results as one sweep.
    const fs::path out = scratch() / "shards";
    fs::remove_all(out);
    spec["seed"] = 1;
    const fs::path small = write_spec("shards-small", spec);
    for (const char* shard : {"0/2", "1/2"}) {
        const Result r = run("sweep " + small.string() + " --device cpu --out " + out.string() + " --shard " + shard + " --json");
        ASSERT_EQ(r.code, 0) << r.err;
        EXPECT_EQ(json::parse(r.out)["succeeded"], 1);
    }
    const Result r = run("sweep " + small.string() + " --device cpu --out " + out.string() + " --json");
    EXPECT_EQ(json::parse(r.out)["finished_before"], 2);
}

TEST(CliSweep, FailedRunsAreRecordedAndSkipped) {
    json spec = tiny_spec();
    spec["eig"] = "-1,1", spec["seed"] = 1;
    spec["lr"] = {0.003, 1e6};  // the second one diverges
    spec["clip"] = 0, spec["weight_decay"] = 0;
    const fs::path path = write_spec("diverges", spec), out = scratch() / "diverges";
    fs::remove_all(out);
    Result r = run("sweep " + path.string() + " --device cpu --out " + out.string());
    EXPECT_EQ(r.code, 1) << r.out << r.err;
    EXPECT_NE(r.out.find("failed: "), std::string::npos) << r.out;
    const auto ids = dry_run_ids(path.string() + " --out " + out.string());
    ASSERT_EQ(ids.size(), 2u);
    const std::string bad_id = *std::find_if(ids.begin(), ids.end(), [](auto& id) { return id.find("lr1e+06") != std::string::npos; });
    const json failed = json::parse(slurp(out / bad_id / "failed.json"));
    EXPECT_EQ(failed["exit_code"], 2);
    EXPECT_NE(failed["log_tail"].get<std::string>().find("diverged"), std::string::npos) << failed.dump();
    r = run("sweep " + path.string() + " --device cpu --out " + out.string() + " --json");
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(json::parse(r.out)["failed_before"], 1);
    r = run("sweep " + path.string() + " --device cpu --out " + out.string() + " --retry-failed");
    EXPECT_EQ(r.code, 1);
    r = run("sweep --summarize " + out.string() + " --over seed,lr --json");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(json::parse(r.out)["groups"][0]["failed"], 1);
}

TEST(CliSweep, BadInputIsOneLineAndExitCode2) {
    auto spec_with = [](const char* key, json value) {
        json s = tiny_spec();
        s[key] = std::move(value);
        return s;
    };
    const std::vector<std::pair<json, std::string>> specs = {
        {spec_with("lrs", {0.1}), "/lrs"},
        {spec_with("seed", json::array()), "/seed"},
        {spec_with("eig", {"0,1", "0,2"}), "/eig/1"},
        {spec_with("grid", {{{"steps", -3}}}), "/grid/0/steps"},
    };
    int n = 0;
    for (const auto& [spec, pointer] : specs) {
        const fs::path path = write_spec("bad" + std::to_string(n++), spec);
        const fs::path out = scratch() / "bad-out";
        const Result r = run("sweep " + path.string() + " --device cpu --out " + out.string());
        EXPECT_EQ(r.code, 2) << spec.dump();
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
        EXPECT_NE(r.err.find(path.string() + ": " + pointer + ":"), std::string::npos) << r.err;
        EXPECT_FALSE(fs::exists(out));
    }
    const fs::path good = write_spec("good", tiny_spec());
    for (const std::string& args : std::vector<std::string>{"sweep " + (scratch() / "missing.json").string(), "sweep " + good.string() + " --shard 2/2",
                                   "sweep " + good.string() + " --device tpu", "sweep " + good.string() + " --jobs-per-device 0",
                                   "sweep", "sweep --summarize " + (scratch() / "nowhere").string(),
                                   "sweep --summarize " + scratch().string() + " --buckets 9:3"}) {
        const Result r = run(args);
        EXPECT_EQ(r.code, 2) << args << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << r.err;
    }
    const fs::path not_json = scratch() / "not.json";
    std::ofstream(not_json) << "{\"format\": ";
    EXPECT_EQ(run("sweep " + not_json.string()).code, 2);
}

}  // namespace
