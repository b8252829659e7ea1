// The lab's report: per case the figures of issue 8's list, as Markdown, and the chart of
// book completion time against users as a self-contained SVG.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "lab_internal.hpp"

namespace fairlane::lab {
namespace {

std::string money(double usd) {
  return fmt::format("${:.2f}", usd);
}

std::string seconds_or_dash(std::optional<double> s) {
  return s ? fmt::format("{:.1f} s", *s) : std::string("-");
}

// Lateness: "+12.5%" late, "-40.0%" early, "0.0%" on time (to the shown precision).
std::string signed_percent_or_dash(std::optional<double> fraction) {
  if (!fraction) return "-";
  if (std::abs(*fraction) < 0.0005) return "0.0%";
  return fmt::format("{:+.1f}%", 100.0 * *fraction);
}

// (actual completion - promised) / promised for every accepted book that was given an ETA
// and has ended: above 0 late, below 0 early.
std::vector<double> lateness(const CaseResult& r) {
  std::vector<double> out;
  for (const BookRecord& book : r.books) {
    const auto taken = book.taken_s();
    if (book.refused() || !book.eta_s || *book.eta_s <= 0 || !taken) continue;
    out.push_back((*taken - *book.eta_s) / *book.eta_s);
  }
  return out;
}

bool died_at_provider(Fate f) {
  return f == Fate::provider_429_requests || f == Fate::provider_429_tokens ||
         f == Fate::provider_503 || f == Fate::timeout || f == Fate::failed;
}

}  // namespace

std::string_view case_name(Case c) {
  switch (c) {
    case Case::one_at_a_time:
      return "1. one page at a time per user";
    case Case::all_at_once:
      return "2. all pages at once";
    case Case::token_bucket:
      return "3. token buckets in front (our 429)";
    case Case::fairlane:
      return "4. fairlane";
    case Case::client_pool:
      return "5. an HTTP client pool of 200";
  }
  return "?";
}

std::string_view fate_name(Fate f) {
  switch (f) {
    case Fate::pending:
      return "not ended";
    case Fate::done:
      return "done";
    case Fate::provider_429_requests:
      return "provider 429 on requests";
    case Fate::provider_429_tokens:
      return "provider 429 on tokens";
    case Fate::provider_503:
      return "provider 503 overloaded";
    case Fate::our_429:
      return "our own 429";
    case Fate::timeout:
      return "client timeout";
    case Fate::failed:
      return "failed";
    case Fate::door_busy:
      return "door busy";
    case Fate::upload_refused:
      return "upload refused";
    case Fate::upload_error:
      return "upload error";
  }
  return "?";
}

bool BookRecord::clean() const {
  return std::all_of(pages.begin(), pages.end(),
                     [](const PageRecord& p) { return p.fate == Fate::done; });
}

bool BookRecord::refused() const {
  return !pages.empty() && pages.front().fate == Fate::door_busy;
}

bool BookRecord::not_uploaded() const {
  return !pages.empty() &&
         (pages.front().fate == Fate::upload_refused || pages.front().fate == Fate::upload_error);
}

std::optional<double> BookRecord::finished_s() const {
  double last = 0;
  for (const PageRecord& p : pages) {
    if (p.fate == Fate::pending) return std::nullopt;
    last = std::max(last, p.ended_s);
  }
  return last;
}

std::optional<double> BookRecord::taken_s() const {
  if (served_s) return served_s;
  const auto finished = finished_s();
  if (!finished) return std::nullopt;
  return *finished - uploaded_s;
}

std::optional<double> quantile(std::vector<double> values, double p) {
  if (values.empty()) return std::nullopt;
  std::sort(values.begin(), values.end());
  const auto rank = static_cast<std::size_t>(std::ceil(p * static_cast<double>(values.size())));
  return values[std::clamp<std::size_t>(rank, 1, values.size()) - 1];
}

int users_at(const LabConfig& config, double t) {
  int users = 0;
  for (std::size_t step = 0; step < config.ramp.size(); ++step) {
    if (t + 1e-9 >= config.seconds(config.step_s * static_cast<double>(step)))
      users = config.ramp[step];
  }
  return users;
}

CaseResult run_case(Case which, const LabConfig& config) {
  return which == Case::fairlane ? run_fairlane(config) : run_direct(which, config);
}

std::string markdown(const std::vector<CaseResult>& results, const LabConfig& config) {
  std::string out = fmt::format(
      "Lab: {} users on a ramp ({}), a {}-page book each; provider {} RPM, {} TPM, {} in flight, "
      "{:.1f} s a call{}\n\n",
      config.ramp.back(), fmt::join(config.ramp, ", "), config.pages_per_book,
      config.per_minute(config.requests_per_minute), config.per_minute(config.tokens_per_minute),
      config.max_in_flight, config.seconds(config.latency_s),
      config.time_scale != 1.0 ? fmt::format(" (time scale {})", config.time_scale) : "");
  out +=
      "| case | first failure | pages died at the provider | pages we refused | books clean / sent "
      "| "
      "spend | wasted | page wait p50 / p95 | book time p50 / p95 | peak in flight | "
      "late against the promise p50 / p90 / max | later than promise + 10% |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const CaseResult& r : results) {
    if (!r.error.empty()) {
      out += fmt::format("| {} | could not run: {} | | | | | | | | | | |\n", case_name(r.which),
                         r.error);
      continue;
    }
    std::int64_t died = 0, refused = 0, clean = 0;
    double wasted = 0;
    std::vector<double> page_waits, book_times;
    for (const BookRecord& book : r.books) {
      const bool whole = book.clean();
      clean += whole ? 1 : 0;
      for (const PageRecord& p : book.pages) {
        if (died_at_provider(p.fate)) ++died;
        if (p.fate == Fate::our_429 || p.fate == Fate::door_busy) ++refused;
        if (p.fate == Fate::done) {
          page_waits.push_back(p.ended_s - book.uploaded_s);
          if (!whole) wasted += static_cast<double>(p.tokens) * config.price_per_mtok / 1e6;
        }
      }
      if (whole) book_times.push_back(*book.finished_s() - book.uploaded_s);
    }
    const std::string first =
        r.first_failure ? fmt::format("{} at {:.1f} s, {} users", fate_name(r.first_failure->fate),
                                      r.first_failure->at_s, r.first_failure->users)
                        : std::string("none");
    const std::vector<double> late = lateness(r);
    const auto over = std::count_if(late.begin(), late.end(), [](double x) { return x > 0.1; });
    const std::string late_share =
        late.empty()
            ? std::string("-")
            : fmt::format("{} of {} ({:.1f}%)", over, late.size(),
                          100.0 * static_cast<double>(over) / static_cast<double>(late.size()));
    out += fmt::format(
        "| {} | {} | {} | {} | {} / {} | {} | {} | {} / {} | {} / {} | {} | {} / {} / {} | {} |\n",
        case_name(r.which), first, died, refused, clean, r.books.size(), money(r.spend_usd),
        money(wasted), seconds_or_dash(quantile(page_waits, 0.5)),
        seconds_or_dash(quantile(page_waits, 0.95)), seconds_or_dash(quantile(book_times, 0.5)),
        seconds_or_dash(quantile(book_times, 0.95)), r.peak_in_flight,
        signed_percent_or_dash(quantile(late, 0.5)), signed_percent_or_dash(quantile(late, 0.9)),
        signed_percent_or_dash(quantile(late, 1.0)), late_share);
  }
  out += "\n";
  for (const CaseResult& r : results) {
    if (!r.error.empty()) continue;
    out += fmt::format(
        "- {}: {} calls reached the provider, {} answered 429, {} answered 503; "
        "busiest full minute {}; {:.1f} s{}.",
        case_name(r.which), r.provider_requests, r.provider_429, r.provider_503,
        r.busiest_minute_utilisation
            ? fmt::format("{:.1f}% of the TPM limit", 100.0 * *r.busiest_minute_utilisation)
            : std::string("-"),
        r.duration_s, r.cut_short ? " (cut short at the deadline)" : "");
    if (r.which == Case::client_pool) {
      std::vector<double> ended;
      for (const BookRecord& book : r.books) {
        for (const PageRecord& p : book.pages) {
          if (p.fate != Fate::pending) ended.push_back(p.ended_s - book.uploaded_s);
        }
      }
      out += fmt::format(
          " Its clients called again {} times after a 429 or 503 and gave up on {} attempts at "
          "their timeout, beginning them again; pages ended, done or not, after p50 {} / p95 {}.",
          r.retried_after_refusal, r.client_retries, seconds_or_dash(quantile(ended, 0.5)),
          seconds_or_dash(quantile(ended, 0.95)));
    }
    if (r.which == Case::fairlane) {
      std::int64_t accepted = 0, busy = 0, upload_refused = 0, upload_errors = 0;
      std::string first_refused, first_error;
      std::vector<double> late, promised, refused_waits;
      for (const BookRecord& book : r.books) {
        if (book.refused()) {
          ++busy;
          if (book.refused_wait_s) refused_waits.push_back(*book.refused_wait_s);
          continue;
        }
        if (book.not_uploaded()) {
          const bool refused_upload = book.pages.front().fate == Fate::upload_refused;
          ++(refused_upload ? upload_refused : upload_errors);
          std::string& first = refused_upload ? first_refused : first_error;
          if (first.empty()) first = book.upload_answer;
          continue;
        }
        ++accepted;
        if (book.eta_s) promised.push_back(*book.eta_s);
        if (book.eta_s && book.taken_s()) late.push_back(*book.taken_s() - *book.eta_s);
      }
      out += fmt::format(
          " The door accepted {} books (the longest ETA it promised: {}) and said busy to {} "
          "(the shortest wait it then estimated: {}), against a maximum of {:.1f} s; books "
          "finished past the ETA it gave them by p50 {} / p95 {}.",
          accepted, seconds_or_dash(quantile(promised, 1.0)), busy,
          seconds_or_dash(quantile(refused_waits, 0.0)), config.seconds(config.max_wait_s),
          seconds_or_dash(quantile(late, 0.5)), seconds_or_dash(quantile(late, 0.95)));
      // Neither the door's refusals nor the provider's: the upload itself went wrong.
      if (upload_refused + upload_errors > 0) {
        out += fmt::format(
            " The service refused the upload of {} books (the first: {}); {} uploads failed "
            "(the first: {}).",
            upload_refused, first_refused.empty() ? "-" : first_refused, upload_errors,
            first_error.empty() ? "-" : first_error);
      }
    }
    out += "\n";
  }
  return out;
}

std::string svg_chart(const std::vector<CaseResult>& results, const LabConfig& config) {
  // x: the ramp's steps, evenly spaced, labelled with the users; y: the median time a clean
  // book uploaded at that step took. A step where no book came out clean has no point.
  constexpr double kWidth = 960, kHeight = 420, kLeft = 70, kRight = 390, kTop = 30, kBottom = 60;
  const double plot_w = kWidth - kLeft - kRight;
  const double plot_h = kHeight - kTop - kBottom;
  std::map<Case, std::vector<std::pair<std::size_t, double>>> lines;
  double y_max = 1;
  for (const CaseResult& r : results) {
    for (std::size_t step = 0; step < config.ramp.size(); ++step) {
      std::vector<double> times;
      for (const BookRecord& book : r.books) {
        if (book.users_at_upload == config.ramp[step] && book.clean()) {
          times.push_back(*book.finished_s() - book.uploaded_s);
        }
      }
      if (const auto median = quantile(times, 0.5)) {
        lines[r.which].emplace_back(step, *median);
        y_max = std::max(y_max, *median);
      }
    }
  }
  const auto x_of = [&](std::size_t step) {
    return kLeft +
           plot_w * (config.ramp.size() > 1
                         ? static_cast<double>(step) / static_cast<double>(config.ramp.size() - 1)
                         : 0.5);
  };
  const auto y_of = [&](double s) { return kTop + plot_h * (1.0 - s / y_max); };
  std::string out = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} "
      "{1}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" "
      "fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"18\" font-size=\"14\">Book completion time (median of clean books) "
      "against users</text>\n",
      kWidth, kHeight, kLeft);
  out += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"black\"/>\n",
                     kLeft, kTop, kTop + plot_h);
  out += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"black\"/>\n",
                     kLeft, kTop + plot_h, kLeft + plot_w);
  for (int tick = 0; tick <= 4; ++tick) {
    const double s = y_max * tick / 4.0;
    out += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{:.0f} s</text>\n",
                       kLeft - 6, y_of(s) + 4, s);
  }
  for (std::size_t step = 0; step < config.ramp.size(); ++step) {
    out += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", x_of(step),
                       kTop + plot_h + 18, config.ramp[step]);
  }
  out += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">users</text>\n",
                     kLeft + plot_w / 2, kTop + plot_h + 40);
  static constexpr std::array<const char*, 5> kColours{"#d62728", "#ff7f0e", "#9467bd", "#2ca02c",
                                                       "#1f77b4"};
  int row = 0;
  for (const CaseResult& r : results) {
    const char* colour = kColours[static_cast<std::size_t>(r.which) - 1];
    std::string points;
    for (const auto& [step, s] : lines[r.which])
      points += fmt::format("{:.1f},{:.1f} ", x_of(step), y_of(s));
    if (!points.empty()) {
      out +=
          fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\" points=\"{}\"/>\n",
                      colour, points);
      for (const auto& [step, s] : lines[r.which]) {
        out += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\"/>\n",
                           x_of(step), y_of(s), colour);
      }
    }
    const double ly = kTop + 10 + 20.0 * row++;
    out += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"14\" height=\"4\" fill=\"{}\"/>\n",
                       kLeft + plot_w + 16, ly - 4, colour);
    out += fmt::format("<text x=\"{}\" y=\"{}\">{}{}</text>\n", kLeft + plot_w + 36, ly,
                       case_name(r.which), points.empty() ? " (no clean book)" : "");
  }
  out += "</svg>\n";
  return out;
}

}  // namespace fairlane::lab
