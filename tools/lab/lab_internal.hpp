// What the lab's translation units share; not for anyone else.
#pragma once

#include <string>
#include <string_view>

#include "fairlane/provider/provider.hpp"
#include "lab.hpp"
#include "provider_sim.hpp"

namespace fairlane::lab {

// The instruction sent with every page, by every case (fairlane's default prompt).
inline constexpr std::string_view kPrompt =
    "Extract the text of this page and structure it as Markdown.";

// Cases 1, 2, 3, 5 (direct.cpp) and 4 (through_fairlane.cpp).
CaseResult run_direct(Case which, const LabConfig& config);
CaseResult run_fairlane(const LabConfig& config);

// Case 4: a book's fate from its upload's answer (`status` 0: none came): pending when
// accepted (202), door_busy for a 503 whose error.type is "busy", upload_refused for a 4xx,
// upload_error for anything else (a 5xx, a 503 not busy, an answer not expected).
Fate upload_fate(long status, std::string_view body);
// That answer in a few words: "413 payload_too_large: <message>", "502: <the body's start>".
std::string upload_answer(long status, std::string_view body);

// A provider's answer as a page's fate: a 429 with no requests remaining is the RPM's.
Fate fate_of(const ProviderOutcome& outcome);
// The tokens a call was billed: its usage when it was answered, else 0.
std::int64_t billed_tokens(const ProviderOutcome& outcome);
provider_sim::Config stand_in_config(const LabConfig& config);
// `bytes` of text for a page: "Book of user U, page P. " and filler.
std::string page_text(int user, int page, std::size_t bytes);
// The stand-in's GET /stats into the result's provider figures.
void read_stand_in_stats(const std::string& json, const LabConfig& config, CaseResult& result);

}  // namespace fairlane::lab
