#include "statetrack/gpu/train_options.hpp"

#include <fmt/format.h>

#include <cmath>

#include "statetrack/automata/error.hpp"
#include "json_unsigned.hpp"

namespace statetrack::gpu {

Precision parse_precision(const std::string& text) {
    if (text == "fp32") return Precision::fp32;
    if (text == "fp64") return Precision::fp64;
    throw InputError("argument", "--precision", fmt::format("unknown precision '{}' (fp32 or fp64)", text));
}

const char* to_string(Precision precision) { return precision == Precision::fp32 ? "fp32" : "fp64"; }

Device parse_device(const std::string& text) {
    if (text == "cpu") return Device::cpu;
    if (text == "cuda") return Device::cuda;
    throw InputError("argument", "--device", fmt::format("unknown device '{}' (cpu or cuda)", text));
}

const char* to_string(Device device) { return device == Device::cpu ? "cpu" : "cuda"; }

void validate(const TrainOptions& o) {
    validate(o.model);
    auto bad = [](const char* option, std::string message) { throw InputError("argument", option, std::move(message)); };
    if (o.batch < 1 || o.batch > max_batch) bad("--batch", fmt::format("batch {} must be 1..{}", o.batch, max_batch));
    if (o.steps < 1 || o.steps > max_steps) bad("--steps", fmt::format("steps {} must be 1..{}", o.steps, max_steps));
    if (!(o.adamw.lr > 0) || !std::isfinite(o.adamw.lr)) bad("--lr", "the learning rate must be a positive number");
    if (!(o.adamw.clip >= 0) || !std::isfinite(o.adamw.clip)) bad("--clip", "the clipping norm must be >= 0 (0: off)");
    if (!(o.adamw.weight_decay >= 0) || o.adamw.weight_decay * o.adamw.lr >= 1)
        bad("--weight-decay", "weight decay must be >= 0 with lr * weight_decay < 1");
    if (o.eval_words < 1 || o.eval_words > max_eval_words) bad("--eval-words", fmt::format("must be 1..{}", max_eval_words));
    if (o.stop_at > o.steps) bad("--stop-at", fmt::format("step {} is beyond --steps {}", o.stop_at, o.steps));
    if (o.out_dir.empty()) bad("--out", "an output folder is required");
    if (o.device == Device::cuda && o.precision != Precision::fp32)
        bad("--precision", "the CUDA backend trains in fp32 only (--precision fp64 is for --device cpu)");
    if (o.cuda_device < 0) bad("--cuda-device", "the GPU index must be >= 0");
}

nlohmann::json options_to_json(const TrainOptions& o) {
    return {{"model", config_to_json(o.model)},
            {"batch", o.batch},
            {"steps", o.steps},
            {"lr", o.adamw.lr},
            {"min_lr", o.adamw.min_lr},
            {"warmup_fraction", o.adamw.warmup_fraction},
            {"weight_decay", o.adamw.weight_decay},
            {"clip", o.adamw.clip},
            {"seed", o.seed},
            {"train_len", {o.train_len.min, o.train_len.max}},
            {"test_len", {o.test_len.min, o.test_len.max}},
            {"eval_every", o.eval_interval()},
            {"eval_words", o.eval_words},
            {"precision", to_string(o.precision)},
            {"device", to_string(o.device)},
            {"matmul", o.device == Device::cuda ? to_string(o.matmul) : "none"},
            // the two paths round differently, so a resume keeps the run's
            {"cuda_recurrences", o.device == Device::cuda ? cuda_recurrences_name(o.cuda_chunked) : "none"},
            {"cuda_words", o.device == Device::cuda ? cuda_words_name(o.cuda_packed) : "none"}};
}

TrainOptions options_from_json(const nlohmann::json& j, const std::string& origin) {
    try {
        TrainOptions o;
        o.model = config_from_json(j.at("model"), origin);
        o.batch = json_unsigned(j.at("batch"));
        o.steps = json_unsigned(j.at("steps"));
        o.adamw.lr = j.at("lr").get<double>();
        o.adamw.min_lr = j.at("min_lr").get<double>();
        o.adamw.warmup_fraction = j.at("warmup_fraction").get<double>();
        o.adamw.weight_decay = j.at("weight_decay").get<double>();
        o.adamw.clip = j.at("clip").get<double>();
        o.seed = json_unsigned<std::uint64_t>(j.at("seed"));
        o.train_len = {json_unsigned(j.at("train_len").at(0)), json_unsigned(j.at("train_len").at(1))};
        o.test_len = {json_unsigned(j.at("test_len").at(0)), json_unsigned(j.at("test_len").at(1))};
        o.eval_every = json_unsigned(j.at("eval_every"));
        o.eval_words = json_unsigned(j.at("eval_words"));
        o.precision = parse_precision(j.at("precision").get<std::string>());
        // absent in checkpoints written before the CUDA backend was wired: those are CPU runs
        o.device = parse_device(j.value("device", std::string("cpu")));
        const std::string matmul = j.value("matmul", std::string("none"));
        if (matmul != "none") o.matmul = parse_matmul_precision(matmul);
        // absent in checkpoints written before the option: those ran chunked where the GPU could
        const std::string recurrences = j.value("cuda_recurrences", std::string("none"));
        if (recurrences != "none") o.cuda_chunked = parse_cuda_recurrences(recurrences);
        // absent in checkpoints written before the option: from the build that began packing words
        // (2026-11-26) those ran packed; older ones resume packed too, their last bits aside as after
        // any change of the kernels
        const std::string words = j.value("cuda_words", std::string("none"));
        if (words != "none") o.cuda_packed = parse_cuda_words(words);
        return o;
    } catch (const nlohmann::json::exception& e) {
        throw InputError(origin, "/options", fmt::format("malformed options: {}", e.what()));
    }
}

}  // namespace statetrack::gpu
