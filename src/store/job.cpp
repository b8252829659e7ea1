#include "fairlane/store/job.hpp"

#include <array>
#include <utility>

namespace fairlane {
namespace {

constexpr std::array<std::pair<JobState, std::string_view>, 5> kJobStates{{
    {JobState::queued, "queued"},
    {JobState::running, "running"},
    {JobState::done, "done"},
    {JobState::failed, "failed"},
    {JobState::cancelled, "cancelled"},
}};

constexpr std::array<std::pair<PageState, std::string_view>, 5> kPageStates{{
    {PageState::queued, "queued"},
    {PageState::in_flight, "in_flight"},
    {PageState::done, "done"},
    {PageState::failed, "failed"},
    {PageState::cancelled, "cancelled"},
}};

template <typename State, std::size_t N>
std::string_view name_of(const std::array<std::pair<State, std::string_view>, N>& names, State s) {
  for (const auto& [state, name] : names) {
    if (state == s) return name;
  }
  return "unknown";
}

template <typename State, std::size_t N>
std::optional<State> state_named(const std::array<std::pair<State, std::string_view>, N>& names,
                                 std::string_view wanted) {
  for (const auto& [state, name] : names) {
    if (name == wanted) return state;
  }
  return std::nullopt;
}

}  // namespace

std::string_view to_string(JobState state) {
  return name_of(kJobStates, state);
}
std::string_view to_string(PageState state) {
  return name_of(kPageStates, state);
}
std::optional<JobState> job_state_from(std::string_view name) {
  return state_named(kJobStates, name);
}
std::optional<PageState> page_state_from(std::string_view name) {
  return state_named(kPageStates, name);
}

}  // namespace fairlane
