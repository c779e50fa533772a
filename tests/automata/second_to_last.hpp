#pragma once
// A hand-built cascade and its DFA for the cascade tests: "the second-to-last letter is a" over
// {a, b}, or over {a, b, c} where c acts exactly as a (for the letter-class tests). Level 0
// remembers the last letter's kind (reset to 1 on a or c, to 0 on b); level 1 copies level 0's
// value from *before* the update. The DFA tracks the last two kinds: state 2*second_last + last.
#include "statetrack/automata/cascade.hpp"
#include "statetrack/automata/dfa.hpp"

namespace second_to_last {

namespace sa = statetrack::automata;

inline sa::LevelAction constant(sa::Point r) { return {sa::LevelAction::Kind::constant, {r}}; }

// letters: 2 ({a, b}) or 3 ({a, b, c}).
inline sa::Cascade cascade(std::size_t letters = 2) {
    sa::Cascade c;
    c.method = "test";
    c.alphabet = {"a", "b", "c"};
    c.alphabet.resize(letters);
    auto per_letter = [&](sa::Point on_a, sa::Point on_b) {
        std::vector<sa::LevelAction> list{constant(on_a), constant(on_b), constant(on_a)};
        list.resize(letters);
        return list;
    };
    c.levels.resize(2);
    c.levels[0].points = 2;
    c.levels[0].actions[{}] = per_letter(1, 0);
    c.levels[1].points = 2;
    c.levels[1].actions[{0}] = per_letter(0, 0);
    c.levels[1].actions[{1}] = per_letter(1, 1);
    c.start = {0, 0};
    for (sa::Point last = 0; last < 2; ++last)
        for (sa::Point second = 0; second < 2; ++second) c.decode[{last, second}] = 2 * second + last;
    c.dfa_states = 4;
    return c;
}

inline sa::Dfa dfa(std::size_t letters = 2) {
    std::vector<std::string> alphabet{"a", "b", "c"};
    alphabet.resize(letters);
    sa::Dfa d = sa::make_dfa(4, alphabet, "second-to-last");
    for (sa::State q = 0; q < 4; ++q)
        for (sa::Letter a = 0; a < letters; ++a) d.next(q, a) = 2 * (q % 2) + (a == 1 ? 0 : 1);
    d.accepting = {false, false, true, true};
    return d;
}

}  // namespace second_to_last
