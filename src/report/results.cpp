#include "report/results.h"

#include <cstdio>
#include <limits>

#include "report/stats.h"
#include "train/evaluate.h"

namespace copytask {

nlohmann::json by_length_json(const std::vector<double>& by_length) {
  nlohmann::json out = nlohmann::json::object();
  for (size_t k = 0; k < by_length.size(); ++k)
    if (by_length[k] >= 0) out[std::to_string(k)] = by_length[k];
  return out;
}

nlohmann::json run_record_json(const RunRecord& r) {
  return {{"seed", r.seed},
          {"test_exact", r.test_exact},
          {"test_token", r.test_token},
          {"train_exact", r.train_exact},
          {"train_token", r.train_token},
          {"final_loss", r.final_loss},
          {"test_loss", r.test_loss},
          {"steps", r.steps},
          {"seconds", r.seconds},
          {"batch_members", r.batch_members},
          {"test_exact_by_length", by_length_json(r.test_exact_by_length)}};
}

RunRecord run_record_of(int64_t seed, const SplitScores& train, const SplitScores& test) {
  RunRecord run;
  run.seed = seed;
  run.test_exact = test.exact;
  run.test_token = test.token;
  run.train_exact = train.exact;
  run.train_token = train.token;
  run.final_loss = train.loss;  // eval-mode loss on the whole train split
  run.test_loss = test.loss;
  run.test_exact_by_length = test.exact_by_length;
  return run;
}

RunRecord run_record_from_json(const nlohmann::json& j) {
  RunRecord r;
  r.seed = j.at("seed").get<int64_t>();
  r.test_exact = j.at("test_exact").get<double>();
  r.test_token = j.at("test_token").get<double>();
  r.train_exact = j.at("train_exact").get<double>();
  r.train_token = j.at("train_token").get<double>();
  r.final_loss = j.at("final_loss").get<double>();
  r.test_loss = j.at("test_loss").get<double>();
  r.steps = j.at("steps").get<int64_t>();
  r.seconds = j.at("seconds").get<double>();
  r.batch_members = j.at("batch_members").get<int64_t>();
  const auto& by_length = j.at("test_exact_by_length");
  for (const auto& item : by_length.items()) {
    const size_t k = std::stoul(item.key());
    if (r.test_exact_by_length.size() <= k) r.test_exact_by_length.resize(k + 1, -1.0);
    r.test_exact_by_length[k] = item.value().get<double>();
  }
  return r;
}

nlohmann::json scheme_results_json(const std::vector<RunRecord>& runs) {
  nlohmann::json out;
  out["runs"] = nlohmann::json::array();
  std::vector<double> test_exact, test_token, train_exact, train_token, final_loss;
  for (const auto& run : runs) {
    out["runs"].push_back(run_record_json(run));
    test_exact.push_back(run.test_exact);
    test_token.push_back(run.test_token);
    train_exact.push_back(run.train_exact);
    train_token.push_back(run.train_token);
    final_loss.push_back(run.final_loss);
  }
  out["test_exact"] = summary_json(summarize(test_exact));
  out["test_token"] = summary_json(summarize(test_token));
  out["train_exact"] = summary_json(summarize(train_exact));
  out["train_token"] = summary_json(summarize(train_token));
  out["final_loss"] = summary_json(summarize(final_loss, 0.0, std::numeric_limits<double>::infinity()));
  return out;
}

std::vector<TableRow> results_table(const nlohmann::json& results, const std::vector<std::string>& order) {
  std::vector<TableRow> rows;
  for (const auto& name : order) {
    if (!results.contains("schemes") || !results["schemes"].contains(name)) continue;
    const auto& s = results["schemes"][name]["test_exact"];
    rows.push_back({name, s["n"].get<int64_t>(), s["mean"].get<double>(), s["std"].get<double>(),
                    s["min"].get<double>(), s["max"].get<double>()});
  }
  return rows;
}

std::string table_format(const std::vector<TableRow>& rows) {
  size_t width = 6;
  for (const auto& row : rows) width = std::max(width, row.scheme.size());
  char line[256];
  std::snprintf(line, sizeof line, "%-*s  %5s  %10s  %8s  %8s  %8s\n", static_cast<int>(width), "scheme", "seeds",
                "test exact", "std", "min", "max");
  std::string out = line;
  for (const auto& row : rows) {
    std::snprintf(line, sizeof line, "%-*s  %5lld  %10.4f  %8.4f  %8.4f  %8.4f\n", static_cast<int>(width),
                  row.scheme.c_str(), static_cast<long long>(row.n), row.mean, row.std, row.min, row.max);
    out += line;
  }
  return out;
}

}  // namespace copytask
