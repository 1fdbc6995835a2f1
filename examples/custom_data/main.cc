// lockstep's built-in CNN (model.kind = "cnn") trained on images from CSV files in the format
// of the Fashion-MNIST CSV export: a header line, then "label,p1,...,p784" (pixels 0-255).
//   custom_data --set csv.train=train.csv --set csv.val=val.csv --nproc 2
// The files are the program's own data source; lockstep's sampler decides who reads which
// row, so --deterministic, --resume and any --nproc work as with the built-in data sets.
#include <lockstep/lockstep.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace ls = lockstep;

constexpr int64_t kPixels = 28 * 28, kClasses = 10;

class CsvImages : public ls::DataSource {
 public:
  // Reads the whole file; a bad row is an error naming the file and line.
  static ls::Result<std::shared_ptr<const CsvImages>> Load(const std::string& path) {
    std::ifstream in(path);
    if (!in) return ls::Status::NotFound("csv: cannot open '" + path + "'");
    auto data = std::make_shared<CsvImages>();
    std::string line;
    std::getline(in, line);  // header
    for (int64_t number = 2; std::getline(in, line); ++number) {
      std::istringstream row(line);
      std::vector<int> values;
      for (std::string cell; std::getline(row, cell, ',');) values.push_back(std::atoi(cell.c_str()));
      if (values.size() != kPixels + 1 || values[0] < 0 || values[0] >= kClasses)
        return ls::Status::InvalidArgument(path + ":" + std::to_string(number) +
                                           ": expected a label in [0, 10) and 784 pixels");
      data->labels_.push_back(values[0]);
      for (int64_t i = 1; i <= kPixels; ++i) data->pixels_.push_back(static_cast<uint8_t>(values[i]));
    }
    if (data->labels_.empty()) return ls::Status::InvalidArgument("csv: '" + path + "' holds no rows");
    return std::shared_ptr<const CsvImages>(data);
  }

  int64_t size() const override { return static_cast<int64_t>(labels_.size()); }
  ls::SampleLayout layout() const override { return {.features = kPixels, .classes = kClasses}; }
  ls::Status Read(const ls::SampleKey& key, const ls::SampleSlot& out) const override {
    const uint8_t* p = pixels_.data() + key.index * kPixels;
    for (int64_t i = 0; i < kPixels; ++i) out.features[i] = static_cast<float>(p[i]) / 255.0f;
    *out.label = labels_[static_cast<size_t>(key.index)];
    return ls::Status::Ok();
  }

 private:
  std::vector<uint8_t> pixels_;
  std::vector<int32_t> labels_;
};

int main(int argc, char** argv) {
  ls::Job job = ls::BuiltinJob();  // the built-in models; the data is ours
  job.config_keys = {{"csv.train", "string", "\"train.csv\"", "training images, one CSV row each"},
                     {"csv.val", "string", "\"val.csv\"", "validation images"}};
  job.data = [](const ls::Config& config) -> ls::Result<ls::DataSources> {
    LS_ASSIGN_OR_RETURN(std::string train_path, config.GetString("csv.train", "train.csv"));
    LS_ASSIGN_OR_RETURN(std::string val_path, config.GetString("csv.val", "val.csv"));
    LS_ASSIGN_OR_RETURN(auto train, CsvImages::Load(train_path));
    LS_ASSIGN_OR_RETURN(auto val, CsvImages::Load(val_path));
    return ls::DataSources{train, val};
  };
  ls::TrainOptions defaults;
  defaults.out_dir = "runs/custom_data";
  defaults.config_toml = R"(
    [model]
    kind = "cnn"
    [optim]
    lr = 2e-3
    [train]
    batch_size = 32
    steps = 150
    log_every = 25
    [eval]
    every = 75
    [checkpoint]
    every = 75
  )";
  return ls::TrainMain(argc, argv, job, defaults);
}
