// `statetrack sweep`: every run of a spec's product (docs/sweeps.md), one `statetrack train` process per
// job, one job per GPU (or K per GPU, or K on the CPU); `--summarize DIR` prints the table.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>

#include "command.hpp"
#include "statetrack/automata/error.hpp"
#include "statetrack/automata/files.hpp"
#include "statetrack/gpu/cuda_backend.hpp"
#include "statetrack/gpu/sweep.hpp"

extern char** environ;

namespace statetrack::cli {

namespace {

namespace fs = std::filesystem;

struct SweepArgs {
    std::string spec, out, shard, device = "auto", summarize, output, over = "seed", buckets;
    std::size_t jobs = 1;
    bool dry_run = false, retry_failed = false, json = false;
};

std::vector<std::string> split(const std::string& text, char separator) {
    std::vector<std::string> parts;
    std::size_t from = 0;
    while (from <= text.size()) {
        const std::size_t at = std::min(text.find(separator, from), text.size());
        if (at > from) parts.push_back(text.substr(from, at - from));
        from = at + 1;
    }
    return parts;
}

// Runs `statetrack train` (this very binary) for one run, its stdout and stderr in RUN_DIR/train.log;
// `cuda_device` (an entry of the parent's CUDA_VISIBLE_DEVICES, or an index) pins it to one GPU.
int spawn_train(const std::string& exe, const std::vector<std::string>& args, const std::string& log,
                const std::optional<std::string>& cuda_device) {
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e)
        if (!std::string_view(*e).starts_with("CUDA_VISIBLE_DEVICES=")) env.emplace_back(*e);
    if (cuda_device) env.push_back("CUDA_VISIBLE_DEVICES=" + *cuda_device);
    std::vector<char*> argv{const_cast<char*>(exe.c_str())}, envp;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    pid_t pid = 0;
    const int error = posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    if (error) throw std::runtime_error(fmt::format("cannot start {}: {}", exe, std::strerror(error)));
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

void run_summarize(const SweepArgs& a) {
    std::vector<gpu::LengthBucket> buckets;
    if (!a.buckets.empty()) buckets = gpu::parse_length_buckets(a.buckets);
    const nlohmann::json summary = gpu::summarize_sweep(a.summarize, split(a.over, ','), buckets);
    const std::string md = gpu::sweep_summary_markdown(summary);
    if (!a.output.empty()) write_file_atomically(a.output, md);
    if (a.json) print_json(summary);
    else if (a.output.empty()) fmt::print("{}", md);
    else fmt::print("wrote {} ({} rows)\n", a.output, summary["groups"].size());
}

void run_sweep_command(const SweepArgs& a) {
    using namespace gpu;
    if (!a.summarize.empty()) return run_summarize(a);
    if (a.spec.empty()) throw InputError("argument", "SPEC", "a sweep spec (JSON) is required, or --summarize DIR");
    if (a.jobs < 1 || a.jobs > 256) throw InputError("argument", "--jobs-per-device", "must be 1..256");
    const SweepSpec spec = read_sweep_spec(a.spec);
    std::optional<Shard> shard;
    if (!a.shard.empty()) shard = parse_shard(a.shard, "--shard");
    else shard = shard_from_environment();
    const Shard s = shard.value_or(Shard{});
    const std::vector<SweepRun> runs = select_shard(spec.runs, s);
    const std::string name = spec.name.empty() ? fs::path(a.spec).stem().string() : spec.name;
    const std::string dir = a.out.empty() ? (fs::path("results") / name).string() : a.out;

    // Worker slots: K per visible GPU, or K on the CPU.
    std::string device = a.device;
    const std::size_t gpus = cuda_device_count();
    if (device == "auto") device = gpus > 0 ? "cuda" : "cpu";
    if (device != "cpu" && device != "cuda")
        throw InputError("argument", "--device", fmt::format("unknown device '{}' (cpu, cuda or auto)", device));
    std::vector<std::string> slot_device;  // CUDA_VISIBLE_DEVICES of each slot's jobs
    if (device == "cuda") {
        if (gpus == 0) {
            std::string why;
            cuda_available(&why);
            throw InputError("argument", "--device", fmt::format("no CUDA device is visible ({})", why.empty() ? "none found" : why));
        }
        slot_device = cuda_slot_devices(gpus, std::getenv("CUDA_VISIBLE_DEVICES"), a.jobs);
    }
    const std::size_t slots = device == "cuda" ? slot_device.size() : a.jobs;

    if (a.dry_run) {
        nlohmann::json list = nlohmann::json::array();
        for (const auto& run : runs) {
            const std::string run_dir = (fs::path(dir) / run.id).string();
            const auto args = train_arguments(run, run_dir, device);
            list.push_back({{"id", run.id}, {"state", to_string(run_state(run_dir))}, {"config", run.config},
                            {"command", fmt::format("statetrack {}", fmt::join(args, " "))}});
        }
        if (a.json) {
            print_json({{"dir", dir}, {"shard", fmt::format("{}/{}", s.index, s.count)}, {"spec_runs", spec.runs.size()},
                        {"device", device}, {"slots", slots}, {"runs", list}});
            return;
        }
        for (const auto& r : list) fmt::print("{:8}  {}\n", r["state"].get<std::string>(), r["id"].get<std::string>());
        fmt::print("{} of {} runs in shard {}/{}; would run on {} {} slot(s) into {}\n", runs.size(), spec.runs.size(), s.index,
                   s.count, slots, device, dir);
        return;
    }

    std::error_code ec;
    fs::create_directories(dir, ec);
    if (!fs::is_directory(dir, ec)) throw InputError(dir, "--out", "cannot create the output folder");
    write_sweep_manifest(dir, spec);
    const std::string exe = fs::read_symlink("/proc/self/exe").string();
    std::cerr << fmt::format("sweep {}: {} runs, shard {}/{} has {}; device {} ({} slot(s)); results in {}\n", name,
                             spec.runs.size(), s.index, s.count, runs.size(), device, slots, dir);
    const auto launch = [&](const SweepRun& run, const std::string& run_dir, std::size_t slot) {
        auto args = train_arguments(run, run_dir, device);
        if (fs::exists(fs::path(run_dir) / "checkpoint.bin")) args.push_back("--resume");  // continue an interrupted run
        std::optional<std::string> cuda;
        if (device == "cuda") cuda = slot_device.at(slot);
        return spawn_train(exe, args, (fs::path(run_dir) / "train.log").string(), cuda);
    };
    const SweepOutcome o = run_sweep(runs, dir, slots, launch, a.retry_failed, &std::cerr);
    if (a.json) {
        print_json({{"dir", dir},
                    {"shard", fmt::format("{}/{}", s.index, s.count)},
                    {"spec_runs", spec.runs.size()},
                    {"shard_runs", runs.size()},
                    {"device", device},
                    {"slots", slots},
                    {"finished_before", o.finished_before},
                    {"failed_before", o.failed_before},
                    {"succeeded", o.succeeded},
                    {"failed", o.failed},
                    {"failed_ids", o.failed_ids}});
    } else {
        fmt::print("{} runs in shard {}/{}: {} ran now ({} ok, {} failed), {} finished before, {} failed before\n", runs.size(),
                   s.index, s.count, o.succeeded + o.failed, o.succeeded, o.failed, o.finished_before, o.failed_before);
        for (const auto& id : o.failed_ids) fmt::print("failed: {} (see {}/{}/failed.json)\n", id, dir, id);
        fmt::print("table: statetrack sweep --summarize {}\n", dir);
    }
    if (o.failed > 0) throw Exit{1};
}

}  // namespace

void add_sweep(CLI::App& app) {
    auto a = std::make_shared<SweepArgs>();
    CLI::App* cmd = app.add_subcommand("sweep", "Run a grid of training runs (every GPU, Slurm arrays, resumable) or summarize one");
    cmd->add_option("spec", a->spec, "Sweep spec (statetrack.sweep/1 JSON, docs/sweeps.md)");
    cmd->add_option("--out", a->out, "Results folder (default results/<spec name>)");
    cmd->add_option("--shard", a->shard, "Run shard i/N of the runs (0 <= i < N); default from SLURM_ARRAY_TASK_ID/COUNT");
    cmd->add_option("--device", a->device, "cuda (one job per visible GPU), cpu, or auto (cuda when a GPU is visible)")
        ->capture_default_str();
    cmd->add_option("--jobs-per-device", a->jobs, "Concurrent jobs per GPU, or in all with --device cpu")->capture_default_str();
    cmd->add_flag("--dry-run", a->dry_run, "List the runs of this shard and their state; run nothing");
    cmd->add_flag("--retry-failed", a->retry_failed, "Run again the runs that failed before (default: skip them)");
    cmd->add_option("--summarize", a->summarize, "Print the table of the results in DIR instead of running");
    cmd->add_option("-o,--output", a->output, "With --summarize: write the Markdown table to FILE");
    cmd->add_option("--over", a->over, "With --summarize: keys to take best/median over (comma-separated)")->capture_default_str();
    cmd->add_option("--buckets", a->buckets, "With --summarize: length buckets A:B,C:D (default: powers of two)");
    cmd->add_flag("--json", a->json, "JSON on stdout");
    cmd->callback([a] { run_sweep_command(*a); });
}

}  // namespace statetrack::cli
