#include "statetrack/gpu/checkpoint.hpp"

#include <fmt/format.h>

#include <bit>
#include <cstring>

#include "statetrack/automata/error.hpp"
#include "statetrack/automata/files.hpp"
#include "json_unsigned.hpp"

namespace statetrack::gpu {

namespace {

// The evaluation records `train --resume` reads back (the step and the scaled accuracy of each):
// checked here, so that a sealed but hand-edited header is exit 2 at load, not an exception or an
// out-of-range float conversion in the trainer.
void check_history(const nlohmann::json& history, const std::string& origin) {
    if (!history.is_array()) throw InputError(origin, "/history", "expected an array of evaluation records");
    for (std::size_t i = 0; i < history.size(); ++i) {
        const nlohmann::json& r = history[i];
        const std::string at = fmt::format("/history/{}", i);
        if (!r.is_object() || !r.contains("step") || !r["step"].is_number_unsigned())
            throw InputError(origin, at, "expected an object with an unsigned integer 'step'");
        if (!r.contains("eval") || !r["eval"].is_object() || !r["eval"].contains("scaled_accuracy") ||
            !r["eval"]["scaled_accuracy"].is_number())
            throw InputError(origin, at + "/eval", "expected an object with a numeric 'scaled_accuracy'");
    }
}

constexpr std::string_view magic = "statetrack.checkpoint/1\n";
static_assert(std::endian::native == std::endian::little, "checkpoints are little-endian");

std::uint64_t fnv1a(std::string_view bytes) {
    std::uint64_t h = 0xcbf29ce484222325ULL;
    for (unsigned char c : bytes) h = (h ^ c) * 0x100000001b3ULL;
    return h;
}

void put_u64(std::string& out, std::uint64_t x) { out.append(reinterpret_cast<const char*>(&x), 8); }
std::uint64_t get_u64(std::string_view bytes, std::size_t at) {
    std::uint64_t x;
    std::memcpy(&x, bytes.data() + at, 8);
    return x;
}

}  // namespace

std::string encode_checkpoint(const Checkpoint& c) {
    const nlohmann::json header = {{"format", "statetrack.checkpoint/1"},
                                   {"task", task_to_json(c.task)},
                                   {"options", options_to_json(c.options)},
                                   {"layout", layout_to_json(parameter_layout(c.options.model))},
                                   {"step", c.step},
                                   {"history", c.history}};
    const std::string text = header.dump();
    std::string out(magic);
    put_u64(out, text.size());
    out += text;
    for (const auto* values : {&c.params, &c.m, &c.v})
        out.append(reinterpret_cast<const char*>(values->data()), values->size() * sizeof(double));
    put_u64(out, fnv1a(out));
    return out;
}

Checkpoint decode_checkpoint(const std::string& bytes, const std::string& origin) {
    const std::string_view all(bytes);
    if (!all.starts_with(magic)) throw InputError(origin, "byte 0", "not a statetrack checkpoint (bad magic line)");
    if (all.size() < magic.size() + 16) throw InputError(origin, "", "truncated checkpoint");
    const std::size_t end = all.size() - 8;
    if (fnv1a(all.substr(0, end)) != get_u64(all, end))
        throw InputError(origin, "", "checksum mismatch: the checkpoint is corrupt or truncated");
    const std::uint64_t header_size = get_u64(all, magic.size());
    const std::size_t header_at = magic.size() + 8;
    if (header_size > end - header_at) throw InputError(origin, "", "header length beyond the end of the file");
    nlohmann::json header;
    try {
        header = nlohmann::json::parse(all.substr(header_at, header_size));
    } catch (const nlohmann::json::exception& e) {
        throw InputError(origin, "header", fmt::format("bad JSON: {}", e.what()));
    }
    // value() below throws a json type_error on anything but an object (found by fuzzing).
    if (!header.is_object()) throw InputError(origin, "header", "expected a JSON object");
    Checkpoint c;
    c.task = task_from_json(header.value("task", nlohmann::json::object()), origin);
    c.options = options_from_json(header.value("options", nlohmann::json::object()), origin);
    if (c.options.model.vocab != vocab_size(c.task) || c.options.model.classes != num_classes(c.task))
        throw InputError(origin, "/options/model", "the model's vocabulary or classes do not match its task");
    try {
        c.step = json_unsigned(header.at("step"));
        c.history = header.at("history");
    } catch (const nlohmann::json::exception& e) {
        throw InputError(origin, "header", fmt::format("malformed header: {}", e.what()));
    }
    check_history(c.history, origin);
    const std::size_t total = parameter_layout(c.options.model).total;
    const std::size_t data_at = header_at + header_size;
    if (end - data_at != 3 * total * sizeof(double))
        throw InputError(origin, "", fmt::format("{} bytes of weights, expected {} for this model", end - data_at,
                                                 3 * total * sizeof(double)));
    std::size_t at = data_at;
    for (auto* values : {&c.params, &c.m, &c.v}) {
        values->resize(total);
        std::memcpy(values->data(), all.data() + at, total * sizeof(double));
        at += total * sizeof(double);
    }
    return c;
}

void write_checkpoint(const std::string& path, const Checkpoint& checkpoint) {
    write_file_atomically(path, encode_checkpoint(checkpoint));
}

Checkpoint read_checkpoint(const std::string& path) { return decode_checkpoint(read_text_file(path), path); }

}  // namespace statetrack::gpu
