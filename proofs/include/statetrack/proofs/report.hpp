#pragma once
// `statetrack report`: compile and verify the zoo, run every theorem checker, and render the
// result as Markdown and JSON (docs/report.md describes both).
#include <nlohmann/json.hpp>

#include <string>

#include "statetrack/proofs/theorems.hpp"

namespace statetrack::proofs {

struct ReportOptions {
    bool quick = false;  // sized-down theorem checks (tests)
    std::string mlregtest_dir;
    Progress progress;
};

struct Report {
    bool passed = false;
    nlohmann::json json;   // {"passed", "languages": [...], "theorems": [...], "seconds"}
    std::string markdown;
    std::string table;     // the summary printed on stdout
};

Report run_report(const ReportOptions& options);

}  // namespace statetrack::proofs
