#pragma once
// Sweeps (docs/sweeps.md): a spec names trainer options with a value or a list of values; the sweep is
// the product of the lists (the union of the products of its grids), one run per combination. Each run
// has a stable id derived from its configuration, so results from several machines, shards or resumed
// sweeps land in the same folder DIR/<id>/ and merge without coordination.
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace statetrack::gpu {

// One option a spec may set: its JSON key (the trainer option with '_' for '-'), the `train` flag that
// passes it, the kind of value, and the trainer's default.
struct SweepKey {
    enum class Kind { text, count, real };
    const char* key;
    const char* flag;
    Kind kind;
    const char* default_value;  // JSON text
};
std::span<const SweepKey> sweep_keys();

// One training run: every key of sweep_keys() with its value, and the id derived from them.
struct SweepRun {
    std::string id;
    nlohmann::json config;  // object: key -> value (all keys; defaults filled in)
};

struct SweepSpec {
    std::string name;
    nlohmann::json source;        // the spec as read
    std::vector<SweepRun> runs;   // sorted by id, no two alike
};

// Parses and expands a spec. Bad specs (unknown keys, empty lists, wrong types, values the trainer
// refuses) throw InputError(origin, JSON pointer, message).
SweepSpec parse_sweep_spec(const nlohmann::json& spec, const std::string& origin);
SweepSpec read_sweep_spec(const std::string& path);

// "<task>-<model>-<eig>-L<layers>-lr<lr>-s<seed>-<hash>": the readable part for people, the hash (FNV-1a
// 64 of the keys that differ from their defaults) for uniqueness. Adding a key to sweep_keys() with the
// trainer's old behaviour as its default therefore keeps every earlier id.
std::string sweep_run_id(const nlohmann::json& config);

// The `statetrack train` arguments of a run (after the program name).
std::vector<std::string> train_arguments(const SweepRun& run, const std::string& out_dir, const std::string& device);

// Shard i of N (0 <= i < N) takes every N-th run of the id-sorted list, starting at i: the shards
// partition the runs exactly.
struct Shard {
    std::size_t index = 0, count = 1;
};
Shard parse_shard(const std::string& text, const std::string& place);  // "i/N"
// From SLURM_ARRAY_TASK_ID (minus SLURM_ARRAY_TASK_MIN when set) and SLURM_ARRAY_TASK_COUNT; none
// when they are absent. `get` reads a variable (std::getenv by default; tests pass their own).
std::optional<Shard> shard_from_environment(const std::function<const char*(const char*)>& get = {});
std::vector<SweepRun> select_shard(const std::vector<SweepRun>& runs, Shard shard);

// The state of DIR/<id>/: finished (summary.json complete: stopped at its last step), failed (a
// failed.json recorded by the sweep), or pending.
enum class RunState { pending, finished, failed };
RunState run_state(const std::string& run_dir);
const char* to_string(RunState state);

// DIR/sweep.json: the spec(s) and every run's configuration, merged with what is already there (other
// shards and machines write the same folder).
void write_sweep_manifest(const std::string& dir, const SweepSpec& spec);

// Runs one job: trains `run` into `run_dir` on worker slot `slot`; returns the exit status (0 ok).
// The last lines of its log go to DIR/<id>/failed.json when it fails.
using RunLauncher = std::function<int(const SweepRun& run, const std::string& run_dir, std::size_t slot)>;

struct SweepOutcome {
    std::size_t finished_before = 0, failed_before = 0, succeeded = 0, failed = 0;
    std::vector<std::string> failed_ids;
};

// Runs every pending run (and failed ones with retry_failed) on `slots` worker threads, each taking
// the next run when its job ends; finished runs are skipped. Writes DIR/<id>/run.json first and
// DIR/<id>/failed.json for a job that fails. One progress line per finished job.
SweepOutcome run_sweep(const std::vector<SweepRun>& runs, const std::string& dir, std::size_t slots,
                       const RunLauncher& launch, bool retry_failed, std::ostream* progress);

// CUDA devices visible to this process (0 without the CUDA backend or without a GPU).
std::size_t cuda_device_count();
// The CUDA_VISIBLE_DEVICES value of each worker slot: `jobs_per_device` slots per device, slot s on
// device s / jobs_per_device. Devices are named by the entries of the parent's CUDA_VISIBLE_DEVICES
// (`visible`, may be null) when it lists exactly `devices` of them, by their indices otherwise.
std::vector<std::string> cuda_slot_devices(std::size_t devices, const char* visible, std::size_t jobs_per_device);

// Summaries: group the runs of DIR by their configuration without the keys in `over` (seed by
// default) and report, per group, the best and median final scaled accuracy, overall and per length
// bucket.
struct LengthBucket {
    std::size_t min = 0, max = 0;
};
std::vector<LengthBucket> parse_length_buckets(const std::string& text);  // "40:64,65:128"
// Powers of two between min and max: 40..256 -> 40:64, 65:128, 129:256.
std::vector<LengthBucket> default_length_buckets(std::size_t min, std::size_t max);

// statetrack.sweep-summary/1 (docs/sweeps.md). Empty `buckets`: default_length_buckets over the test
// lengths of the runs found.
nlohmann::json summarize_sweep(const std::string& dir, const std::vector<std::string>& over,
                               std::vector<LengthBucket> buckets);
std::string sweep_summary_markdown(const nlohmann::json& summary);

}  // namespace statetrack::gpu
