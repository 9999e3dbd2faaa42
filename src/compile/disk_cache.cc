// The disk cache's directory: what an entry is, how it is named, written, checked,
// locked and evicted, and the Halide runtime file beside the entries (see
// disk_cache.h). Building, loading and running the shared libraries themselves is
// aot_kernel.cc's.
#include "compile/disk_cache.h"

#include <fcntl.h>
#include <link.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "braze/status.h"
#include "compile/aot_kernel.h"
#include "ir/logging.h"

namespace braze {
namespace disk_cache {
namespace {

namespace fs = std::filesystem;
using compile::KernelLayout;

// 2: the .meta ends with the CRC-32 of what precedes its "end" line (an edited layout
// that still parsed was trusted: an output marked empty made a kernel never launched,
// its fetch zeros, with no warning).
constexpr char kMagic[] = "braze-aot 2";

// ---- build IDs: what makes a stored kernel belong to this build ----

// The GNU build ID note of a loaded object, as hex; empty if it has none.
std::string BuildIdOf(const dl_phdr_info* info) {
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    const char* p = reinterpret_cast<const char*>(info->dlpi_addr + ph.p_vaddr);
    const char* end = p + ph.p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      const auto* note = reinterpret_cast<const ElfW(Nhdr)*>(p);
      const char* name = p + sizeof(ElfW(Nhdr));
      const char* desc = name + ((note->n_namesz + 3) & ~3u);
      if (note->n_type == NT_GNU_BUILD_ID && note->n_namesz == 4 &&
          std::memcmp(name, "GNU", 4) == 0) {
        std::string hex;
        for (unsigned j = 0; j < note->n_descsz; ++j) {
          absl::StrAppend(&hex, absl::Hex(static_cast<unsigned char>(desc[j]), absl::kZeroPad2));
        }
        return hex;
      }
      p = desc + ((note->n_descsz + 3) & ~3u);
    }
  }
  return "";
}

struct BuildIds {
  std::string executable, halide;
};

const BuildIds& Ids() {
  static const BuildIds ids = [] {
    BuildIds found;
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* data) {
          auto* ids = static_cast<BuildIds*>(data);
          const std::string name = info->dlpi_name != nullptr ? info->dlpi_name : "";
          if (name.empty() && ids->executable.empty()) ids->executable = BuildIdOf(info);
          if (name.find("libHalide") != std::string::npos) ids->halide = BuildIdOf(info);
          return 0;
        },
        &found);
    return found;
  }();
  return ids;
}

uint32_t Crc(const void* data, size_t n, uint32_t seed = 0) {
  return static_cast<uint32_t>(crc32(seed, static_cast<const Bytef*>(data), static_cast<uInt>(n)));
}

std::string NameOf(const std::string& text) {
  const uint32_t a = Crc(text.data(), text.size());
  const uint32_t b = Crc(text.data(), text.size(), 0x9e3779b9u);
  return absl::StrCat(absl::Hex(a, absl::kZeroPad8), absl::Hex(b, absl::kZeroPad8));
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Writes `bytes` to a new temporary file next to `path` and returns its name.
absl::StatusOr<std::string> WriteTemporary(const std::string& path, const std::string& bytes) {
  std::string tmp = path + ".tmp.XXXXXX";
  const int fd = mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0)
    return absl::InternalError(absl::StrCat("cannot create ", tmp, ": ", strerror(errno)));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n <= 0) {
      close(fd);
      unlink(tmp.c_str());
      return absl::InternalError(absl::StrCat("cannot write ", tmp, ": ", strerror(errno)));
    }
    done += static_cast<size_t>(n);
  }
  fchmod(fd, 0644);
  close(fd);
  return tmp;
}

// Writes `bytes` to `path` through a temporary file in the same directory and a rename.
absl::Status WriteAtomically(const std::string& path, const std::string& bytes) {
  absl::StatusOr<std::string> tmp = WriteTemporary(path, bytes);
  if (!tmp.ok()) return tmp.status();
  if (rename(tmp->c_str(), path.c_str()) != 0) {
    unlink(tmp->c_str());
    return absl::InternalError(absl::StrCat("cannot rename into ", path, ": ", strerror(errno)));
  }
  return absl::OkStatus();
}

// ---- .meta files ----

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string Unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size()) {
      out += s[i + 1] == 'n' ? '\n' : s[i + 1];
      ++i;
    } else {
      out += s[i];
    }
  }
  return out;
}

struct Meta {
  std::string key;
  uint64_t so_size = 0;
  uint32_t so_crc = 0;
  KernelLayout layout;
};

std::string TypeText(const TensorType& t) {
  std::vector<std::string> dims;
  for (int64_t d : t.shape) dims.push_back(absl::StrCat(d));
  return absl::StrCat(static_cast<int>(t.dtype), ":", absl::StrJoin(dims, ","));
}

std::string Serialize(const Meta& m) {
  std::vector<std::string> elided, outputs, types;
  for (bool e : m.layout.input_elided) elided.push_back(e ? "1" : "0");
  for (int o : m.layout.pipeline_output) outputs.push_back(absl::StrCat(o));
  for (const TensorType& t : m.layout.output_types) types.push_back(TypeText(t));
  std::vector<std::string> failures;
  for (const std::string& f : m.layout.failures) failures.push_back(Escape(f));
  const std::string body = absl::StrCat(
      kMagic, "\nkey ", Escape(m.key), "\nso ", m.so_size, " ", m.so_crc, "\nelided ",
      absl::StrJoin(elided, " "), "\noutputs ", absl::StrJoin(outputs, " "), "\ntypes ",
      absl::StrJoin(types, " "), "\nscheduler ", static_cast<int>(m.layout.scheduler),
      "\nfailures ", failures.size(), "\n", absl::StrJoin(failures, "\n"),
      failures.empty() ? "" : "\n", "schedule ", Escape(m.layout.schedule), "\n");
  return absl::StrCat(body, "end ", Crc(body.data(), body.size()), "\n");
}

// Whether the layout's outputs are consistent: as many types as entries, each entry the
// next pipeline output, in order, or -1 (an output with no elements, which the kernel
// does not compute: a type with a 0 dim, or a -1 dim that was 0 when it compiled).
bool ConsistentOutputs(const KernelLayout& layout) {
  if (layout.output_types.size() != layout.pipeline_output.size()) return false;
  int next = 0;
  for (size_t j = 0; j < layout.pipeline_output.size(); ++j) {
    const Shape& shape = layout.output_types[j].shape;
    const bool may_be_empty =
        std::any_of(shape.begin(), shape.end(), [](int64_t d) { return d == 0 || d == -1; });
    const int o = layout.pipeline_output[j];
    if (o == -1 ? !may_be_empty : o != next++) return false;
  }
  return true;
}

bool ParseType(const std::string& text, TensorType* t) {
  std::vector<std::string> parts = absl::StrSplit(text, ':');
  int dtype = 0;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &dtype)) return false;
  t->dtype = static_cast<DType>(dtype);
  t->shape.clear();
  if (parts[1].empty()) return true;
  for (absl::string_view d : absl::StrSplit(parts[1], ',')) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(d, &v) || v < -1) return false;  // -1: a symbolic dim
    t->shape.push_back(v);
  }
  return true;
}

// Parses what Serialize wrote; false on anything else, a checksum that differs included.
bool Parse(const std::string& text, Meta* m) {
  const size_t end = text.rfind("\nend ");
  uint32_t crc = 0;
  if (end == std::string::npos || text.back() != '\n' ||
      !absl::SimpleAtoi(absl::string_view(text).substr(end + 5, text.size() - end - 6), &crc) ||
      crc != Crc(text.data(), end + 1)) {
    return false;
  }
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  size_t i = 0;
  auto next = [&](const char* tag, std::string* rest) {
    if (i >= lines.size()) return false;
    const std::string& line = lines[i++];
    const std::string prefix = absl::StrCat(tag, " ");
    if (line == tag) {
      rest->clear();
      return true;
    }
    if (line.rfind(prefix, 0) != 0) return false;
    *rest = line.substr(prefix.size());
    return true;
  };
  if (lines.empty() || lines[i++] != kMagic) return false;
  std::string rest;
  if (!next("key", &rest)) return false;
  m->key = Unescape(rest);
  if (!next("so", &rest)) return false;
  std::vector<std::string> so = absl::StrSplit(rest, ' ');
  if (so.size() != 2 || !absl::SimpleAtoi(so[0], &m->so_size) ||
      !absl::SimpleAtoi(so[1], &m->so_crc)) {
    return false;
  }
  if (!next("elided", &rest)) return false;
  for (absl::string_view e : absl::StrSplit(rest, ' ', absl::SkipEmpty())) {
    if (e != "0" && e != "1") return false;
    m->layout.input_elided.push_back(e == "1");
  }
  if (!next("outputs", &rest)) return false;
  for (absl::string_view o : absl::StrSplit(rest, ' ', absl::SkipEmpty())) {
    int v = 0;
    if (!absl::SimpleAtoi(o, &v)) return false;
    m->layout.pipeline_output.push_back(v);
  }
  if (!next("types", &rest)) return false;
  for (absl::string_view t : absl::StrSplit(rest, ' ', absl::SkipEmpty())) {
    TensorType type;
    if (!ParseType(std::string(t), &type)) return false;
    m->layout.output_types.push_back(type);
  }
  int scheduler = 0, num_failures = 0;
  if (!next("scheduler", &rest) || !absl::SimpleAtoi(rest, &scheduler)) return false;
  m->layout.scheduler = static_cast<Scheduler>(scheduler);
  if (!next("failures", &rest) || !absl::SimpleAtoi(rest, &num_failures) || num_failures < 0) {
    return false;
  }
  for (int f = 0; f < num_failures; ++f) {
    if (i >= lines.size()) return false;
    m->layout.failures.push_back(Unescape(lines[i++]));
  }
  if (!next("schedule", &rest)) return false;
  m->layout.schedule = Unescape(rest);
  if (!next("end", &rest)) return false;
  return ConsistentOutputs(m->layout);
}

uint64_t DirectorySize(const fs::path& dir,
                       std::vector<std::pair<fs::file_time_type, fs::path>>* entries) {
  uint64_t total = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (!e.is_regular_file(ec)) continue;
    total += e.file_size(ec);
    const bool runtime =
        e.path().filename().string().rfind("runtime-", 0) == 0 && e.path().extension() == ".so";
    // A .builds note (RecordBuild) is an entry of its own: evicted alone, least used.
    if (e.path().extension() == ".meta" || e.path().extension() == ".builds" || runtime) {
      entries->emplace_back(e.last_write_time(ec), e.path());
    }
  }
  return total;
}

// A lock on the cache directory (flock: between processes, and between two opens in one
// process) held while an entry's .so and .meta are replaced (exclusive) or read
// (shared), so that a reader sees, and two writers leave, one writer's pair. Two writers
// of one key do not write the same bytes: Halide's unique names differ between two
// compiles in one process, and a .meta of one with the .so of the other was found
// damaged at the next load (DiskCacheTest.ConcurrentWritersOfOneKeyAreSafe, under TSan).
// Without a lock (a directory that cannot be opened) the checksum still catches a mix.
class DirectoryLock {
 public:
  DirectoryLock(const std::string& dir, bool exclusive)
      : fd_(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)) {
    if (fd_ >= 0) flock(fd_, exclusive ? LOCK_EX : LOCK_SH);
  }
  ~DirectoryLock() {
    if (fd_ >= 0) close(fd_);  // closing the last descriptor releases the lock
  }
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;

 private:
  int fd_;
};

// Deletes least recently used entries until the directory is under the bound.
void Evict(const Settings& settings, const std::string& keep) {
  std::vector<std::pair<fs::file_time_type, fs::path>> metas;
  uint64_t total = DirectorySize(settings.dir, &metas);
  if (total <= settings.max_bytes) return;
  std::sort(metas.begin(), metas.end());
  std::error_code ec;
  DirectoryLock lock(settings.dir, /*exclusive=*/true);  // a pair goes as one
  const std::optional<compile::LoadedRuntime> runtime = compile::CurrentRuntime();
  const fs::path runtime_path = runtime ? fs::path(runtime->path) : fs::path();
  for (const auto& [time, meta] : metas) {
    if (total <= settings.max_bytes) break;
    if (meta.stem().string() == keep || meta == runtime_path) continue;
    fs::path so = meta;
    so.replace_extension(".so");
    const uint64_t bytes =
        meta == so ? fs::file_size(so, ec) : fs::file_size(meta, ec) + fs::file_size(so, ec);
    fs::remove(meta, ec);  // unlinking a library another process has loaded is safe
    fs::remove(so, ec);
    if (meta == so) fs::remove(fs::path(so).replace_extension(".sum"), ec);  // a runtime's
    total -= std::min(total, bytes);
  }
}

void Damaged(const std::string& base, const std::string& why) {
  LogWarning(absl::StrCat("disk cache: entry ", base, ".{so,meta} is damaged (", why,
                          "): removed; the kernel is compiled again"));
  std::error_code ec;
  fs::remove(base + ".meta", ec);
  fs::remove(base + ".so", ec);
}

}  // namespace

Settings CurrentSettings() {
  Settings s;
  const char* dir = std::getenv("BRAZE_CACHE_DIR");
  if (dir != nullptr) {
    s.dir = dir;
  } else if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') {
    s.dir = absl::StrCat(xdg, "/braze");
  } else if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    s.dir = absl::StrCat(home, "/.cache/braze");
  }
  s.enabled =
      !s.dir.empty() && s.dir != "off" && !Ids().executable.empty() && !Ids().halide.empty();
  if (const char* mb = std::getenv("BRAZE_CACHE_MAX_MB"); mb != nullptr) {
    uint64_t v = 0;
    if (!absl::SimpleAtoi(mb, &v)) {
      // Not silent (once a process: settings are read at every store).
      static std::once_flag once;
      std::call_once(once, [&] {
        LogWarning(absl::StrCat("BRAZE_CACHE_MAX_MB='", mb,
                                "' is not a whole number of MiB: the disk cache keeps its "
                                "default bound (",
                                s.max_bytes >> 20, " MiB)"));
      });
    } else {
      // Past 2^44 MiB the shift wrapped (to a bound of 0): no bound instead.
      s.max_bytes = v > (UINT64_MAX >> 20) ? UINT64_MAX : v << 20;
    }
  }
  return s;
}

std::string FullKey(const std::string& cluster_key, const std::string& target) {
  const BuildIds& ids = Ids();
  if (ids.executable.empty() || ids.halide.empty()) return "";
  return absl::StrCat("exe ", ids.executable, " halide ", ids.halide, " target ", target, " | ",
                      cluster_key);
}

std::string BuildsPath(const Settings& settings, const std::string& cluster_key,
                       const std::string& target) {
  return absl::StrCat(settings.dir, "/",
                      NameOf(absl::StrCat("target ", target, " | ", cluster_key)), ".builds");
}

static std::string ThisBuild() {
  return absl::StrCat("exe ", Ids().executable, " halide ", Ids().halide);
}

void RecordBuild(const Settings& settings, const std::string& cluster_key,
                 const std::string& target) {
  // Best effort: the note only explains a later miss.
  WriteAtomically(BuildsPath(settings, cluster_key, target), ThisBuild() + "\n").IgnoreError();
}

std::string StaleNote(const Settings& settings, const std::string& cluster_key,
                      const std::string& target) {
  absl::StatusOr<std::string> text = ReadFile(BuildsPath(settings, cluster_key, target));
  if (!text.ok()) return "";
  std::vector<std::string> words = absl::StrSplit(absl::StripAsciiWhitespace(*text), ' ');
  if (words.size() != 4 || words[0] != "exe" || words[2] != "halide") return "";
  const bool exe = words[1] != Ids().executable, halide = words[3] != Ids().halide;
  if (!exe && !halide) return "";
  return absl::StrCat("disk entry stale: ",
                      exe && halide ? "Braze and Halide builds"
                      : exe         ? "Braze build"
                                    : "Halide build",
                      " changed since it was stored");
}

// Creates the cache directory if missing; an error names it and why it cannot be used
// (the first failure used to be the linker's, on a file in /tmp). A read-only directory
// still serves loads: `writable` is asked for only to store.
static absl::Status MakeDirectory(const Settings& settings, bool writable) {
  std::error_code ec;
  fs::create_directories(settings.dir, ec);
  if (!fs::is_directory(settings.dir, ec)) {
    return absl::FailedPreconditionError(
        absl::StrCat("BRAZE_CACHE_DIR ", settings.dir, " is not a directory and cannot be made one",
                     ec ? absl::StrCat(" (", ec.message(), ")") : std::string()));
  }
  if (writable && access(settings.dir.c_str(), W_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("BRAZE_CACHE_DIR ", settings.dir, " is not writable (", strerror(errno), ")"));
  }
  return absl::OkStatus();
}

// A runtime .so's size and checksum, as its .sum file holds them.
static std::string RuntimeSum(const std::string& bytes) {
  return absl::StrCat("size ", bytes.size(), " crc32 ", Crc(bytes.data(), bytes.size()), "\n");
}

// One EnsureRuntime at a time: the check for a loaded runtime, the build and the load.
static std::mutex ensure_runtime_mu;

// The Halide runtime for `target` (without "jit"), built into the directory if missing
// and loaded RTLD_GLOBAL once per process (aot_kernel.h).
static absl::Status EnsureRuntime(const Settings& settings, const std::string& target) {
  std::lock_guard<std::mutex> lock(ensure_runtime_mu);
  if (const std::optional<compile::LoadedRuntime> loaded = compile::CurrentRuntime()) {
    if (loaded->target == target) return absl::OkStatus();
    return absl::FailedPreconditionError(
        absl::StrCat("disk cache: this process already runs kernels for ", loaded->target));
  }
  std::error_code ec;
  BRAZE_RETURN_IF_ERROR(MakeDirectory(settings, /*writable=*/false));
  // Shared by every build of Braze that uses this Halide: it depends on nothing else.
  const std::string base =
      absl::StrCat(settings.dir, "/runtime-",
                   // A runtime with other trampolines is another file.
                   NameOf(absl::StrCat("halide ", Ids().halide, " target ", target, " externs ",
                                       NameOf(compile::RuntimeExternsSource()))));
  const std::string so = base + ".so";
  const std::string sum = base + ".sum";
  // The .so is loaded only when its size and checksum match its .sum: dlopen of a
  // truncated one died of SIGBUS, in every later process too (a black-box test).
  if (fs::exists(so, ec)) {
    absl::StatusOr<std::string> bytes = ReadFile(so), want = ReadFile(sum);
    const std::string got = bytes.ok() ? RuntimeSum(*bytes) : "";
    if (!want.ok() || *want != got) {
      LogWarning(absl::StrCat("disk cache: the Halide runtime ", so,
                              want.ok() ? " is damaged (its size or checksum differs from its .sum)"
                                        : " has no .sum (damaged, or stored by an older Braze)",
                              ": removing it and building it again"));
      fs::remove(so, ec);
      fs::remove(sum, ec);
      if (fs::exists(so, ec)) {  // a read-only or another user's directory: never load it
        return absl::DataLossError(
            absl::StrCat("the damaged Halide runtime ", so, " cannot be removed"));
      }
    }
  }
  if (!fs::exists(so, ec)) {
    BRAZE_RETURN_IF_ERROR(MakeDirectory(settings, /*writable=*/true));
    const std::string tmp_so = so + ".tmp." + std::to_string(getpid());
    absl::Status built = compile::BuildRuntime(target, tmp_so);
    // The .sum before the .so: a process that finds the .so finds its .sum (a concurrent
    // builder writes the same bytes).
    if (built.ok()) {
      absl::StatusOr<std::string> bytes = ReadFile(tmp_so);
      built = bytes.ok() ? WriteAtomically(sum, RuntimeSum(*bytes)) : bytes.status();
    }
    if (built.ok() && rename(tmp_so.c_str(), so.c_str()) != 0) {
      built = absl::InternalError(absl::StrCat("cannot rename into ", so));
    }
    if (!built.ok()) {
      std::remove(tmp_so.c_str());
      return built;
    }
  }
  fs::last_write_time(so, fs::file_time_type::clock::now(), ec);  // recently used
  absl::Status loaded = compile::LoadRuntime(so, target);
  if (absl::IsDataLoss(loaded)) {
    // Damaged, or not what this Braze builds: the next process builds it again.
    std::remove(so.c_str());
    std::remove(sum.c_str());
  }
  return loaded;
}

absl::StatusOr<std::unique_ptr<CompiledKernel>> Load(const Settings& settings,
                                                     const std::string& full_key,
                                                     const std::string& runtime_target,
                                                     const std::string& name, int num_threads) {
  const std::string base = absl::StrCat(settings.dir, "/", NameOf(full_key));
  // The pair is checked and opened as one writer left it. Lock order: this lock, then
  // EnsureRuntime's, then the loaded runtime's (aot_kernel.cc); nothing takes them the
  // other way round.
  DirectoryLock lock(settings.dir, /*exclusive=*/false);
  absl::StatusOr<std::string> meta_text = ReadFile(base + ".meta");
  if (!meta_text.ok()) {
    return absl::NotFoundError("not in the disk cache");
  }
  Meta meta;
  if (!Parse(*meta_text, &meta)) {
    Damaged(base, "unreadable .meta");
    return absl::NotFoundError("damaged entry");
  }
  if (meta.key != full_key) {
    // Another key with the same file name (a hash collision), or a foreign file.
    Damaged(base, "it belongs to another key");
    return absl::NotFoundError("foreign entry");
  }
  absl::StatusOr<std::string> so = ReadFile(base + ".so");
  if (!so.ok() || so->size() != meta.so_size || Crc(so->data(), so->size()) != meta.so_crc) {
    Damaged(base, !so.ok() ? "no .so" : "the .so's size or checksum differs");
    return absl::NotFoundError("damaged entry");
  }
  BRAZE_RETURN_IF_ERROR(EnsureRuntime(settings, runtime_target));
  absl::StatusOr<std::unique_ptr<CompiledKernel>> kernel =
      compile::OpenKernel(base + ".so", name, meta.layout, num_threads, /*loaded=*/true);
  if (!kernel.ok()) {
    Damaged(base, std::string(kernel.status().message()));
    return absl::NotFoundError("damaged entry");
  }
  std::error_code ec;
  fs::last_write_time(base + ".meta", fs::file_time_type::clock::now(), ec);  // recently used
  return kernel;
}

absl::StatusOr<std::unique_ptr<CompiledKernel>> StoreAndLoad(
    const Settings& settings, const std::string& full_key, const std::string& runtime_target,
    const std::string& name, int num_threads, const std::string& object_path,
    const KernelLayout& layout) {
  BRAZE_RETURN_IF_ERROR(MakeDirectory(settings, /*writable=*/true));
  BRAZE_RETURN_IF_ERROR(EnsureRuntime(settings, runtime_target));
  const std::string stem = NameOf(full_key);
  const std::string base = absl::StrCat(settings.dir, "/", stem);
  static std::atomic<int> serial{0};
  const std::string tmp_so = absl::StrCat(base, ".so.tmp.", getpid(), ".", serial++);
  BRAZE_RETURN_IF_ERROR(compile::LinkShared(object_path, tmp_so));
  absl::StatusOr<std::string> so = ReadFile(tmp_so);
  if (!so.ok()) return so.status();
  Meta meta;
  meta.key = full_key;
  meta.so_size = so->size();
  meta.so_crc = Crc(so->data(), so->size());
  meta.layout = layout;
  // The .so first, then its .meta, as one pair (DirectoryLock): a reader that finds the
  // .meta finds its whole .so.
  absl::StatusOr<std::string> tmp_meta = WriteTemporary(base + ".meta", Serialize(meta));
  if (!tmp_meta.ok()) {
    std::remove(tmp_so.c_str());
    return tmp_meta.status();
  }
  {
    DirectoryLock lock(settings.dir, /*exclusive=*/true);
    if (rename(tmp_so.c_str(), (base + ".so").c_str()) != 0) {
      std::remove(tmp_so.c_str());
      std::remove(tmp_meta->c_str());
      return absl::InternalError(absl::StrCat("cannot rename into ", base, ".so"));
    }
    if (rename(tmp_meta->c_str(), (base + ".meta").c_str()) != 0) {
      // No half pair: the new .so with an older .meta would be found damaged.
      std::remove(tmp_meta->c_str());
      std::remove((base + ".so").c_str());
      std::remove((base + ".meta").c_str());
      return absl::InternalError(absl::StrCat("cannot rename into ", base, ".meta"));
    }
  }
  Evict(settings, stem);
  return compile::OpenKernel(base + ".so", name, layout, num_threads, /*loaded=*/false);
}

}  // namespace disk_cache
}  // namespace braze
