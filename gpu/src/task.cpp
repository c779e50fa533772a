#include "statetrack/gpu/task.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "statetrack/automata/error.hpp"
#include "statetrack/automata/formats.hpp"
#include "statetrack/gpu/random.hpp"
#include "json_unsigned.hpp"

namespace statetrack::gpu {

std::size_t num_classes(const Task& task) { return task.target == Target::accept ? 2 : task.dfa.num_states(); }

std::size_t labelled_positions(const Batch& batch) {
    std::size_t n = 0;
    for (auto t : batch.targets) n += t >= 0;
    return n;
}

void check_batch(const Batch& batch) {
    const std::size_t N = batch.batch * batch.length;
    if (batch.tokens.size() != N || (!batch.targets.empty() && batch.targets.size() != N))
        throw InputError("batch", "", fmt::format("tokens and targets must hold B*T = {} values ({} and {})", N,
                                                  batch.tokens.size(), batch.targets.size()));
    if (batch.lengths.empty()) return;
    if (batch.lengths.size() != batch.batch)
        throw InputError("batch", "lengths", fmt::format("{} lengths for {} words", batch.lengths.size(), batch.batch));
    const std::size_t T = batch.length;
    const bool targets = !batch.targets.empty();
    for (std::size_t b = 0; b < batch.batch; ++b) {
        const std::int32_t len = batch.lengths[b];
        if (len < 0 || std::size_t(len) > T)
            throw InputError("batch", fmt::format("lengths[{}]", b), fmt::format("{} is outside 0..{}", len, T));
        if (!targets) continue;
        // a branch-free maximum over the padding's targets (the CUDA backend checks every batch)
        const std::int32_t* row = batch.targets.data() + b * T;
        std::int32_t label = -1;
        for (std::size_t t = std::size_t(len); t < T; ++t) label = std::max(label, row[t]);
        if (label >= 0) {
            const std::size_t t = std::size_t(std::find_if(row + len, row + T, [](std::int32_t x) { return x >= 0; }) - row);
            throw InputError("batch", fmt::format("targets[{}][{}]", b, t), fmt::format("a label past the word's length {}", len));
        }
    }
}

void label_batch(const Task& task, Batch& batch) {
    const auto& dfa = task.dfa;
    batch.targets.assign(batch.batch * batch.length, -1);
    for (std::size_t b = 0; b < batch.batch; ++b) {
        automata::State q = dfa.start;
        const std::size_t len = std::size_t(batch.lengths[b]);
        for (std::size_t t = 0; t < len; ++t) {
            q = dfa.next(q, automata::Letter(batch.tokens[b * batch.length + t]));
            const bool labelled = task.label == LabelMode::every_position || t + 1 == len;
            if (labelled)
                batch.targets[b * batch.length + t] =
                    task.target == Target::accept ? std::int32_t(dfa.accepting[q]) : std::int32_t(q);
        }
    }
}

Batch sample_batch(const Task& task, std::size_t batch, LengthRange lengths, std::uint64_t seed, std::uint64_t stream) {
    Rng rng = make_rng(seed, stream);
    Batch out;
    out.batch = batch;
    out.lengths.resize(batch);
    for (auto& len : out.lengths)
        len = std::int32_t(lengths.min + uniform_below(rng, lengths.max - lengths.min + 1));
    out.length = 0;
    for (auto len : out.lengths) out.length = std::max(out.length, std::size_t(len));
    out.tokens.assign(batch * out.length, 0);
    const std::uint64_t letters = task.dfa.num_letters();
    for (std::size_t b = 0; b < batch; ++b)
        for (std::int32_t t = 0; t < out.lengths[b]; ++t)
            out.tokens[b * out.length + std::size_t(t)] = std::int32_t(uniform_below(rng, letters));
    label_batch(task, out);
    return out;
}

namespace {
std::size_t parse_length(const std::string& text, const std::string& option) {
    std::size_t value = 0;
    const auto* end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), end, value);
    if (text.empty() || ec != std::errc() || ptr != end)
        throw InputError("argument", option, fmt::format("'{}' is not a length", text));
    return value;
}
}  // namespace

LengthRange parse_length_range(const std::string& text, const std::string& option) {
    const auto colon = text.find(':');
    LengthRange range;
    range.min = parse_length(text.substr(0, colon), option);
    range.max = colon == std::string::npos ? range.min : parse_length(text.substr(colon + 1), option);
    if (range.min < 1) throw InputError("argument", option, "lengths start at 1");
    if (range.min > range.max)
        throw InputError("argument", option, fmt::format("empty range {}:{} (write MIN:MAX)", range.min, range.max));
    if (range.max > max_word_length)
        throw LimitError("argument", option, fmt::format("length {} exceeds the limit of {}", range.max, max_word_length));
    return range;
}

LabelMode parse_label_mode(const std::string& text) {
    if (text == "final") return LabelMode::final_position;
    if (text == "every") return LabelMode::every_position;
    throw InputError("argument", "--label", fmt::format("unknown label mode '{}' (final or every)", text));
}

Target parse_target(const std::string& text) {
    if (text == "accept") return Target::accept;
    if (text == "state") return Target::state;
    throw InputError("argument", "--target", fmt::format("unknown target '{}' (accept or state)", text));
}

const char* to_string(LabelMode mode) { return mode == LabelMode::final_position ? "final" : "every"; }
const char* to_string(Target target) { return target == Target::accept ? "accept" : "state"; }

nlohmann::json task_to_json(const Task& task) {
    const auto& dfa = task.dfa;
    nlohmann::json rows = nlohmann::json::array();
    for (std::size_t q = 0; q < dfa.num_states(); ++q) {
        nlohmann::json row = nlohmann::json::array();
        for (std::size_t a = 0; a < dfa.num_letters(); ++a) row.push_back(dfa.next(automata::State(q), automata::Letter(a)));
        rows.push_back(row);
    }
    nlohmann::json accepting = nlohmann::json::array();
    for (std::size_t q = 0; q < dfa.num_states(); ++q)
        if (dfa.accepting[q]) accepting.push_back(q);
    return {{"spec", task.spec},
            {"label", to_string(task.label)},
            {"target", to_string(task.target)},
            {"dfa", {{"name", dfa.name}, {"alphabet", dfa.alphabet}, {"states", dfa.num_states()},
                     {"start", dfa.start}, {"accepting", accepting}, {"transitions", rows}}}};
}

Task task_from_json(const nlohmann::json& json, const std::string& origin) {
    try {
        Task task;
        task.spec = json.at("spec").get<std::string>();
        task.label = parse_label_mode(json.at("label").get<std::string>());
        task.target = parse_target(json.at("target").get<std::string>());
        const auto& d = json.at("dfa");
        const std::size_t states = json_unsigned(d.at("states"));
        auto alphabet = d.at("alphabet").get<std::vector<std::string>>();
        // The DFA readers' bound (docs/limits.md), checked before the table is allocated: a header
        // naming 10^14 states must not ask for that much memory (found by fuzzing checkpoints).
        if (alphabet.empty()) throw InputError(origin, "/task/dfa/alphabet", "the alphabet is empty");
        if (states == 0 || states > automata::max_table_entries / alphabet.size())
            throw LimitError(origin, "/task/dfa/states",
                             fmt::format("{} states x {} letters: a task's DFA needs 1 to {} table entries", states,
                                         alphabet.size(), automata::max_table_entries));
        task.dfa = automata::make_dfa(states, std::move(alphabet), d.at("name").get<std::string>());
        task.dfa.start = json_unsigned<automata::State>(d.at("start"));
        for (auto q : d.at("accepting")) {
            const auto s = json_unsigned(q);
            if (s >= task.dfa.num_states()) throw InputError(origin, "/task/dfa/accepting", "state out of range");
            task.dfa.accepting[s] = true;
        }
        const auto& rows = d.at("transitions");
        if (!rows.is_array() || rows.size() != task.dfa.num_states())
            throw InputError(origin, "/task/dfa/transitions", "one row per state expected");
        for (std::size_t q = 0; q < rows.size(); ++q) {
            if (!rows[q].is_array() || rows[q].size() != task.dfa.num_letters())
                throw InputError(origin, fmt::format("/task/dfa/transitions/{}", q), "one target per letter expected");
            for (std::size_t a = 0; a < rows[q].size(); ++a)
                task.dfa.next(automata::State(q), automata::Letter(a)) = json_unsigned<automata::State>(rows[q][a]);
        }
        automata::validate(task.dfa, origin);
        return task;
    } catch (const nlohmann::json::exception& e) {
        throw InputError(origin, "/task", fmt::format("malformed task: {}", e.what()));
    }
}

}  // namespace statetrack::gpu
