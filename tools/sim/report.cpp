#include "report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "fairlane/core/promise_watch.hpp"

namespace fairlane::sim {

bool invariants_hold(const Metrics& m) {
  return m.pages_lost == 0 && m.pages_duplicated == 0 && m.provider_refused_requests == 0 &&
         m.provider_refused_tokens == 0 && m.provider_refused_concurrency == 0;
}

double quantile(std::vector<double> values, double q) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const auto index = static_cast<std::size_t>(std::ceil(q * static_cast<double>(values.size())));
  return values[std::min(values.size() - 1, index == 0 ? 0 : index - 1)];
}

PromiseFigures promise_figures(const Metrics& m, double max_wait_s, const std::string& light_user) {
  PromiseFigures f;
  std::vector<double> lateness;
  std::vector<double> abs_error;
  std::vector<double> notice;
  std::vector<double> revised_error;
  for (const BookResult& b : m.books) {
    if (!b.finished) {
      ++f.unfinished;
      continue;
    }
    if (b.revised_eta_s && *b.revised_eta_s > 0) {
      revised_error.push_back(std::abs(b.completion_s() - *b.revised_eta_s) / *b.revised_eta_s);
    }
    const double wait_s = b.completion_s() - b.own_s.value_or(0.0);
    if (wait_s > max_wait_s) ++f.over_max_wait;
    if (wait_s > 1.1 * max_wait_s) ++f.over_max_wait_10;
    if (b.predicted_eta_s && *b.predicted_eta_s > 0) {
      const double late = (b.completion_s() - *b.predicted_eta_s) / *b.predicted_eta_s;
      lateness.push_back(late);
      abs_error.push_back(std::abs(late));
      if (late > 0.1) ++f.late_over_10;
      // Later by more than the slack, to the microsecond: a book of one wave of fixed-latency
      // calls promised one latency and taking two is late by the slack exactly, and not
      // revised (nor counted) by the service either.
      const double slack_s = PromiseWatch::slack_s(*b.predicted_eta_s);
      if (b.completion_s() > *b.predicted_eta_s + slack_s + 1e-6) {
        ++f.late_over_slack;
        if (b.first_revised_s && *b.first_revised_s < *b.predicted_eta_s) {
          ++f.revised_in_time;
          notice.push_back(*b.predicted_eta_s - *b.first_revised_s);
        }
      }
    }
    if (!light_user.empty() && b.user == light_user && b.ideal_s && *b.ideal_s > 0) {
      const double ratio = b.completion_s() / *b.ideal_s;
      if (!f.light || ratio > f.light->ratio) {
        f.light = PromiseFigures::Light{b.completion_s(), *b.ideal_s, ratio};
      }
    }
  }
  f.promised = lateness.size();
  if (!lateness.empty()) {
    f.lateness_p50 = quantile(lateness, 0.5);
    f.lateness_p90 = quantile(lateness, 0.9);
    f.lateness_max = quantile(lateness, 1.0);
    f.late_over_10_share =
        static_cast<double>(f.late_over_10) / static_cast<double>(lateness.size());
    f.abs_error_p50 = quantile(abs_error, 0.5);
    f.notice_p50_s = quantile(notice, 0.5);
  }
  f.revised = revised_error.size();
  f.revised_error_p50 = quantile(revised_error, 0.5);
  f.fairness_windows = m.fairness_windows;
  f.min_jain = m.min_jain;
  const Utilisation& u = m.utilisation;
  if (u.measured_s > 0) {
    f.binding = "RPM";
    f.binding_utilisation = u.requests;
    if (u.tokens > f.binding_utilisation) {
      f.binding = "TPM";
      f.binding_utilisation = u.tokens;
    }
    if (u.concurrency > f.binding_utilisation) {
      f.binding = "in flight";
      f.binding_utilisation = u.concurrency;
    }
  }
  return f;
}

namespace {

const char* name_of(SchedulerKind kind) {
  return kind == SchedulerKind::fair ? "fair" : "fifo";
}

std::string percent(double fraction) {
  return fmt::format("{:.1f}%", 100.0 * fraction);
}

// Lateness: "+12.5%" late, "-40.0%" early, "0.0%" on time (to the shown precision).
std::string signed_percent(double fraction) {
  if (std::abs(fraction) < 0.0005) return "0.0%";
  return fmt::format("{:+.1f}%", 100.0 * fraction);
}

void books_table(std::string& out, const Metrics& m) {
  constexpr std::size_t kListed = 40;
  if (m.books.size() > kListed) {
    std::vector<double> completion;
    std::vector<double> ratio;
    for (const BookResult& b : m.books) {
      completion.push_back(b.completion_s());
      if (b.ideal_s) ratio.push_back(b.completion_s() / *b.ideal_s);
    }
    out += fmt::format("Books: {} accepted. Completion p50 {:.1f} s, p90 {:.1f} s, max {:.1f} s.",
                       m.books.size(), quantile(completion, 0.5), quantile(completion, 0.9),
                       quantile(completion, 1.0));
    if (!ratio.empty()) {
      out += fmt::format(" Against the fair-share ideal: p50 {:.2f}x, p90 {:.2f}x, max {:.2f}x.",
                         quantile(ratio, 0.5), quantile(ratio, 0.9), quantile(ratio, 1.0));
    }
    out += "\n\n";
    return;
  }
  out +=
      "| user | arrived | pages | completed after | fair-share ideal | ratio | ETA at the door |\n";
  out += "| --- | --- | --- | --- | --- | --- | --- |\n";
  for (const BookResult& b : m.books) {
    out += fmt::format("| {} | {:.1f} s | {} | {:.1f} s | {} | {} | {} |\n", b.user, b.arrival_s,
                       b.pages, b.completion_s(),
                       b.ideal_s ? fmt::format("{:.1f} s", *b.ideal_s) : "-",
                       b.ideal_s ? fmt::format("{:.2f}x", b.completion_s() / *b.ideal_s) : "-",
                       b.predicted_eta_s ? fmt::format("{:.1f} s", *b.predicted_eta_s) : "-");
  }
  out += "\n";
}

void promises_section(std::string& out, const Scenario& scenario, const Metrics& m) {
  const PromiseFigures f = promise_figures(m, scenario.fairlane.max_wait_s, scenario.light_user);
  out += "### Promises\n\n| measure | value |\n| --- | --- |\n";
  if (f.unfinished > 0) {
    out += fmt::format("| accepted books that never finished (left out below) | {} of {} |\n",
                       f.unfinished, m.books.size());
  }
  if (f.promised > 0) {
    out += fmt::format(
        "| lateness against the door's promise, (actual - promised) / promised: p50 / p90 / max "
        "| {} / {} / {} |\n",
        signed_percent(f.lateness_p50), signed_percent(f.lateness_p90),
        signed_percent(f.lateness_max));
    out += fmt::format("| accepted books later than promised + 10% | {} of {} ({}) |\n",
                       f.late_over_10, f.promised, percent(f.late_over_10_share));
    out +=
        fmt::format("| abs(actual - promised) / promised, p50 | {} |\n", percent(f.abs_error_p50));
    out += fmt::format(
        "| accepted books later than promised + max(2 s, 10%): told a later finish before the "
        "promise passed | {} of {}{} |\n",
        f.revised_in_time, f.late_over_slack,
        f.revised_in_time > 0 ? fmt::format(" (p50 {:.1f} s before)", f.notice_p50_s) : "");
    const auto revisions = [&m](const char* reason) {
      const auto it = m.revisions.find(reason);
      return it == m.revisions.end() ? std::int64_t{0} : it->second;
    };
    out += fmt::format(
        "| revisions: dispatch paused / provider slower / more work ahead; books revised, "
        "abs(actual - last revision) / last revision p50 | {} / {} / {}; {}{} |\n",
        revisions("dispatch_paused"), revisions("provider_slower"), revisions("more_work_ahead"),
        f.revised, f.revised > 0 ? fmt::format(", {}", percent(f.revised_error_p50)) : "");
  } else {
    out += "| the door's promises | none: the door is asked under the fair scheduler only |\n";
  }
  if (scenario.fairlane.max_wait_s < 1e17 && !m.books.empty()) {
    out += fmt::format(
        "| accepted books that waited (completion - own time alone) past max_wait ({:.0f} s) / "
        "past max_wait + 10% | {} / {} of {} |\n",
        scenario.fairlane.max_wait_s, f.over_max_wait, f.over_max_wait_10, m.books.size());
  }
  if (!scenario.light_user.empty()) {
    out +=
        fmt::format("| light user ({}): its slowest book against its fair-share ideal | {} |\n",
                    scenario.light_user,
                    f.light ? fmt::format("{:.1f} s against {:.1f} s ({:.2f}x)",
                                          f.light->completion_s, f.light->ideal_s, f.light->ratio)
                            : std::string("-"));
  }
  out += fmt::format("| Jain's index, lowest window | {} |\n",
                     f.fairness_windows > 0
                         ? fmt::format("{:.4f} ({} window{})", f.min_jain, f.fairness_windows,
                                       f.fairness_windows == 1 ? "" : "s")
                         : std::string("- (no window had 2+ users backlogged)"));
  out += fmt::format("| utilisation of the binding limit while backlogged | {} |\n",
                     f.binding.empty()
                         ? std::string("- (never backlogged long enough)")
                         : fmt::format("{} {} (over {:.0f} s backlogged)", f.binding,
                                       percent(f.binding_utilisation), m.utilisation.measured_s));
  out += fmt::format(
      "| provider refusals: 429 for RPM, 429 for TPM, 503 in flight | {}, {}, {} |\n\n",
      m.provider_refused_requests, m.provider_refused_tokens, m.provider_refused_concurrency);
}

void provider_changes(std::string& out, const Scenario& scenario) {
  for (const ProviderChange& c : scenario.provider.changes) {
    std::string what;
    const auto add = [&what](const std::string& part) {
      what += (what.empty() ? "" : ", ") + part;
    };
    if (c.requests_per_minute) add(fmt::format("RPM {}", *c.requests_per_minute));
    if (c.tokens_per_minute) add(fmt::format("TPM {}", *c.tokens_per_minute));
    if (c.max_in_flight) add(fmt::format("{} in flight", *c.max_in_flight));
    if (c.latency_scale) add(fmt::format("latency x{:g}", *c.latency_scale));
    out += fmt::format(
        "At {:.0f} s the provider changes: {} (fairlane's own limits stay as configured).\n\n",
        c.at_s, what);
  }
}

}  // namespace

std::string books_csv_header() {
  return "scenario,scheduler,user,arrival_s,pages,input_tokens,promised_s,own_s,taken_s,ideal_s,"
         "first_revised_s,revised_eta_s\n";
}

std::string books_csv(const Scenario& scenario, const Metrics& run) {
  const auto figure = [](const std::optional<double>& value) {
    return value ? fmt::format("{:.3f}", *value) : std::string();
  };
  // A field with a comma or a quote is quoted, its quotes doubled (RFC 4180).
  const auto field = [](const std::string& text) {
    if (text.find_first_of(",\"\n") == std::string::npos) return text;
    std::string quoted = "\"";
    for (const char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
    return quoted + "\"";
  };
  std::string out;
  for (const BookResult& b : run.books) {
    out += fmt::format("{},{},{},{:.3f},{},{},{},{},{:.3f},{},{},{}\n", field(scenario.name),
                       name_of(run.scheduler), field(b.user), b.arrival_s, b.pages, b.input_tokens,
                       figure(b.predicted_eta_s), figure(b.own_s), b.completion_s(),
                       figure(b.ideal_s), figure(b.first_revised_s), figure(b.revised_eta_s));
  }
  return out;
}

std::string markdown_report(const Scenario& scenario, const std::vector<Metrics>& runs) {
  std::string out = fmt::format("# {}\n\n", scenario.name.empty() ? "scenario" : scenario.name);
  if (!scenario.description.empty()) out += scenario.description + "\n\n";
  provider_changes(out, scenario);
  for (const Metrics& m : runs) {
    out += fmt::format("## Scheduler: {}\n\n", name_of(m.scheduler));
    books_table(out, m);

    std::int64_t total_tokens = 0;
    for (const auto& [user, tokens] : m.tokens_while_backlogged) total_tokens += tokens;
    if (total_tokens > 0 && m.tokens_while_backlogged.size() <= 10) {
      out += "Token shares while two or more users were backlogged: ";
      bool first = true;
      for (const auto& [user, tokens] : m.tokens_while_backlogged) {
        out +=
            fmt::format("{}{} {}", first ? "" : ", ", user,
                        percent(static_cast<double>(tokens) / static_cast<double>(total_tokens)));
        first = false;
      }
      out += ".\n\n";
    }
    out += "| measure | value |\n| --- | --- |\n";
    out += fmt::format(
        "| pages accepted / done / failed / lost / answered twice | {} / {} / {} / {} / {} |\n",
        m.pages_accepted, m.pages_done, m.pages_failed, m.pages_lost, m.pages_duplicated);
    out += fmt::format(
        "| provider calls / refused for RPM, TPM, in flight (violations) | {} / {}, {}, {} |\n",
        m.provider_calls, m.provider_refused_requests, m.provider_refused_tokens,
        m.provider_refused_concurrency);
    out += fmt::format("| most calls in flight | {} |\n", m.max_in_flight_seen);
    if (m.scheduler == SchedulerKind::fair) {
      out += fmt::format("| pages sent in newer work's turns, for a promise at risk | {} |\n",
                         m.out_of_turn);
    }
    if (m.fairness_windows > 0) {
      out += fmt::format("| {:.0f} s windows with 2+ users backlogged | {} |\n", scenario.window_s,
                         m.fairness_windows);
      out += fmt::format("| Jain's index (counted tokens / weight), lowest window | {:.4f} |\n",
                         m.min_jain);
      out += fmt::format("| largest deviation from a fair token share | {} |\n",
                         percent(m.max_share_deviation));
    }
    const Utilisation& u = m.utilisation;
    if (u.measured_s > 0) {
      out += fmt::format(
          "| utilisation while backlogged (after the first {:.0f} s; {:.0f} s measured): RPM / TPM "
          "/ in flight | {} / {} / {} |\n",
          scenario.window_s, u.measured_s, percent(u.requests), percent(u.tokens),
          percent(u.concurrency));
    }
    if (!m.refusals.empty()) {
      std::string refusals;
      for (const auto& [reason, count] : m.refusals) {
        refusals += fmt::format("{}{} {}", refusals.empty() ? "" : ", ", reason, count);
      }
      out += fmt::format("| door refusals | {} |\n", refusals);
    }
    if (!m.eta_errors.empty()) {
      out += fmt::format(
          "| ETA promised at the door, abs(actual - predicted) / actual: p50 / p90 / max | {} / {} "
          "/ {} |\n",
          percent(quantile(m.eta_errors, 0.5)), percent(quantile(m.eta_errors, 0.9)),
          percent(quantile(m.eta_errors, 1.0)));
    }
    if (scenario.fairlane.max_wait_s < 1e17 && !m.books.empty()) {
      out +=
          fmt::format("| accepted books that took longer than max_wait ({:.0f} s) | {} of {} |\n",
                      scenario.fairlane.max_wait_s, m.books_over_max_wait, m.books.size());
    }
    if (!m.snapshot_eta_errors.empty()) {
      out += fmt::format(
          "| ETA error of queued jobs at {:.0f} s, abs(actual - predicted) / actual remaining: "
          "p50 / p90 / max ({} jobs) | {} / {} / {} |\n",
          scenario.eta_snapshot_s.value_or(0.0), m.snapshot_eta_errors.size(),
          percent(quantile(m.snapshot_eta_errors, 0.5)),
          percent(quantile(m.snapshot_eta_errors, 0.9)),
          percent(quantile(m.snapshot_eta_errors, 1.0)));
    }
    out += fmt::format("| simulated / wall time, events | {:.0f} s / {:.2f} s, {} |\n",
                       m.simulated_s, m.wall_s, m.events);
    out += fmt::format("| invariants (every page ends once, no provider refusal) | {} |\n\n",
                       invariants_hold(m) ? "hold" : "BROKEN");
    promises_section(out, scenario, m);
  }
  return out;
}

}  // namespace fairlane::sim
