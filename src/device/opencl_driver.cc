// The OpenCL probe and the deep-bound drivers; see opencl_driver.h and braze/device.h.
#include "device/opencl_driver.h"

#include <dirent.h>
#include <dlfcn.h>
#include <elf.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "braze/device.h"
#include "device/opencl_probe.h"
#include "ir/environment.h"
#include "ir/logging.h"

namespace braze {
namespace device {
namespace {

// The few OpenCL 1.2 entry points the probe calls (no OpenCL header at build time).
using ClInt = int32_t;
using ClUint = uint32_t;
using ClPlatform = void*;
using ClDevice = void*;
constexpr ClUint kPlatformName = 0x0902;
constexpr ClUint kDeviceName = 0x102B;
constexpr ClUint kDeviceType = 0x1000;
constexpr ClUint kDeviceMaxWorkGroupSize = 0x1004;  // size_t
constexpr ClUint kDeviceLocalMemSize = 0x1023;      // cl_ulong
constexpr ClUint kDeviceExtensions = 0x1030;        // char[], space-separated names
constexpr uint64_t kDeviceTypeAll = 0xFFFFFFFF;
constexpr uint64_t kDeviceTypeCpu = 1 << 1, kDeviceTypeGpu = 1 << 2;

struct Loader {
  void* handle = nullptr;
  absl::Status status;
  std::vector<std::string> devices;
  std::string extensions;     // opencl:0's CL_DEVICE_EXTENSIONS
  bool first_is_cpu = false;  // opencl:0 is a CPU device (POCL's)
};

// In braze-opencl-probe, the Loader being probed: what LoadLibraryIsolated and
// OpenCLDeviceHasExtension answer there (TheLoader() would start another probe). Null
// elsewhere.
const Loader* probe_loader = nullptr;

std::string Info(ClInt (*get)(void*, ClUint, size_t, void*, size_t*), void* object, ClUint what) {
  char buffer[256] = {0};
  if (get(object, what, sizeof(buffer) - 1, buffer, nullptr) != 0) return "?";
  return buffer;
}

// Where the ICD loader finds the drivers' .icd files.
std::string VendorsDir() {
  const char* env = std::getenv("OCL_ICD_VENDORS");
  return env != nullptr && *env != '\0' ? env : "/etc/OpenCL/vendors";
}

// The file a driver's library name stands for: the name itself when it is a path, else
// the first match in $LD_LIBRARY_PATH's and the system's library directories (where
// ld.so would look after its cache). Empty when none exists.
std::string FindLibrary(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("LD_LIBRARY_PATH"); env != nullptr) {
    std::string list = env;
    for (size_t at = 0, end; at <= list.size(); at = end + 1) {
      end = list.find(':', at);
      if (end == std::string::npos) end = list.size();
      if (end > at) dirs.push_back(list.substr(at, end - at));
    }
  }
  // ld.so's configured directories (ld.so.conf and its conf.d files: NVIDIA's driver
  // directory is named there on the GPU machines), then the default ones.
  std::vector<std::string> confs = {"/etc/ld.so.conf"};
  if (DIR* d = opendir("/etc/ld.so.conf.d")) {
    while (const dirent* entry = readdir(d)) {
      const std::string file = entry->d_name;
      if (file.size() > 5 && file.compare(file.size() - 5, 5, ".conf") == 0) {
        confs.push_back("/etc/ld.so.conf.d/" + file);
      }
    }
    closedir(d);
  }
  for (const std::string& conf : confs) {
    std::ifstream in(conf);
    for (std::string line; std::getline(in, line);) {
      if (!line.empty() && line[0] == '/')
        dirs.push_back(line.substr(0, line.find_first_of(" \t#")));
    }
  }
  for (const char* d :
       {"/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
        "/lib/aarch64-linux-gnu", "/usr/lib64", "/lib64", "/usr/lib", "/lib", "/usr/local/lib"}) {
    dirs.push_back(d);
  }
  for (const std::string& dir : dirs) {
    const std::string path = dir + "/" + name;
    if (std::ifstream(path).good()) return path;
  }
  return "";
}

// Whether the 64-bit ELF shared library at `path` names a libLLVM among its DT_NEEDED
// entries: read from its section headers (.dynamic and the string table it links to).
// Sizes are checked against the file's, so a malformed file reads as "no".
bool NeedsLlvm(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return false;
  const uint64_t file_size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  Elf64_Ehdr eh;
  if (!in.read(reinterpret_cast<char*>(&eh), sizeof(eh)) ||
      std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_shentsize != sizeof(Elf64_Shdr) ||
      eh.e_shoff + uint64_t{eh.e_shnum} * sizeof(Elf64_Shdr) > file_size) {
    return false;
  }
  std::vector<Elf64_Shdr> sections(eh.e_shnum);
  in.seekg(static_cast<std::streamoff>(eh.e_shoff));
  if (!in.read(reinterpret_cast<char*>(sections.data()),
               static_cast<std::streamsize>(sections.size() * sizeof(Elf64_Shdr)))) {
    return false;
  }
  for (const Elf64_Shdr& sh : sections) {
    if (sh.sh_type != SHT_DYNAMIC || sh.sh_link >= sections.size()) continue;
    const Elf64_Shdr& strtab = sections[sh.sh_link];
    if (sh.sh_offset + sh.sh_size > file_size || strtab.sh_offset + strtab.sh_size > file_size) {
      return false;
    }
    std::vector<Elf64_Dyn> dyn(sh.sh_size / sizeof(Elf64_Dyn));
    std::string strings(strtab.sh_size, '\0');
    in.seekg(static_cast<std::streamoff>(sh.sh_offset));
    in.read(reinterpret_cast<char*>(dyn.data()),
            static_cast<std::streamsize>(dyn.size() * sizeof(Elf64_Dyn)));
    in.seekg(static_cast<std::streamoff>(strtab.sh_offset));
    in.read(strings.data(), static_cast<std::streamsize>(strings.size()));
    if (!in) return false;
    for (const Elf64_Dyn& d : dyn) {
      if (d.d_tag == DT_NEEDED && d.d_un.d_val < strings.size() &&
          std::strncmp(strings.c_str() + d.d_un.d_val, "libLLVM", 7) == 0) {
        return true;
      }
    }
  }
  return false;
}

// Loads each installed ICD driver (the library named in each vendors/*.icd file) that
// links a libLLVM (or whose file is not found) with RTLD_DEEPBIND before the loader does: the
// driver and the libraries it brings (POCL: libLLVM-15) then resolve their symbols among themselves
// before the process's global scope, where Halide's LLVM 14 is. The loader's own dlopen
// of such a driver finds it loaded. Other drivers are left to the loader: deep-bound,
// NVIDIA's ICD on an H200 machine (2026-11-28) threw std::bad_cast from its first call
// and aborted the process, the known failure of C++ libraries under RTLD_DEEPBIND (a
// second binding of the C++ runtime's locale facets).
void PreloadDriversDeepBound() {
  const std::string dir = VendorsDir();
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return;
  while (const dirent* entry = readdir(d)) {
    const std::string name = entry->d_name;
    if (name.size() < 5 || name.compare(name.size() - 4, 4, ".icd") != 0) continue;
    std::ifstream icd(dir + "/" + name);
    std::string library;
    if (!std::getline(icd, library) || library.empty()) continue;
    // A driver whose file cannot be found is deep-bound by its name, as every driver
    // was before: binding POCL to Halide's LLVM crashes only later, in a kernel's
    // compile, while a driver that breaks under deep binding fails in the probe's
    // probe's process (device/opencl_probe.h), which says so.
    const std::string path = FindLibrary(library);
    if (path.empty()) {
      dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    } else if (NeedsLlvm(path)) {
      dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    }
  }
  closedir(d);
}

// Loads the drivers and the loader into `l` and lists their platforms and devices; the
// first device is refused, by name, when it is too small for Braze's GPU schedules.
void LoadAndList(Loader* l) {
  PreloadDriversDeepBound();
  l->handle = dlopen("libOpenCL.so.1", RTLD_NOW | RTLD_LOCAL);
  if (l->handle == nullptr) {
    l->status = absl::FailedPreconditionError(
        absl::StrCat("OpenCL is not available: cannot load libOpenCL.so.1 (", dlerror(),
                     "); install ocl-icd-libopencl1 and a driver (pocl-opencl-icd runs "
                     "OpenCL on the CPU)"));
    return;
  }
  using Platforms = ClInt (*)(ClUint, ClPlatform*, ClUint*);
  using Devices = ClInt (*)(ClPlatform, uint64_t, ClUint, ClDevice*, ClUint*);
  using GetInfo = ClInt (*)(void*, ClUint, size_t, void*, size_t*);
  auto platforms = reinterpret_cast<Platforms>(dlsym(l->handle, "clGetPlatformIDs"));
  auto devices = reinterpret_cast<Devices>(dlsym(l->handle, "clGetDeviceIDs"));
  auto platform_info = reinterpret_cast<GetInfo>(dlsym(l->handle, "clGetPlatformInfo"));
  auto device_info = reinterpret_cast<GetInfo>(dlsym(l->handle, "clGetDeviceInfo"));
  if (!platforms || !devices || !platform_info || !device_info) {
    l->status = absl::FailedPreconditionError(
        "OpenCL is not available: libOpenCL.so.1 lacks clGetPlatformIDs");
    return;
  }
  ClPlatform ids[16];
  ClUint n = 0;
  if (platforms(16, ids, &n) != 0) n = 0;
  for (ClUint p = 0; p < n && p < 16; ++p) {
    ClDevice devs[16];
    ClUint m = 0;
    if (devices(ids[p], kDeviceTypeAll, 16, devs, &m) != 0) continue;
    for (ClUint d = 0; d < m && d < 16; ++d) {
      uint64_t type = 0;
      device_info(devs[d], kDeviceType, sizeof(type), &type, nullptr);
      const char* kind = (type & kDeviceTypeGpu) != 0   ? "GPU"
                         : (type & kDeviceTypeCpu) != 0 ? "CPU"
                                                        : "other";
      const std::string name = absl::StrCat(Info(platform_info, ids[p], kPlatformName), ": ",
                                            Info(device_info, devs[d], kDeviceName));
      if (l->devices.empty()) {
        // The device Halide's runtime drives (opencl:0). Braze's GPU schedules
        // (schedule/gpu_schedule.cc) use up to 256 work-items per work-group and a few
        // KiB of local memory: a device reporting less is refused here, by name, rather
        // than failing at a kernel's first launch.
        size_t max_group = 0;
        uint64_t local_bytes = 0;
        device_info(devs[d], kDeviceMaxWorkGroupSize, sizeof(max_group), &max_group, nullptr);
        device_info(devs[d], kDeviceLocalMemSize, sizeof(local_bytes), &local_bytes, nullptr);
        size_t size = 0;
        if (device_info(devs[d], kDeviceExtensions, 0, nullptr, &size) == 0 && size > 0) {
          std::string extensions(size, '\0');
          if (device_info(devs[d], kDeviceExtensions, size, extensions.data(), nullptr) == 0) {
            l->extensions = extensions.c_str();  // up to the NUL
          }
        }
        if (max_group < 256 || local_bytes < (32u << 10)) {
          l->status = absl::FailedPreconditionError(
              absl::StrCat("OpenCL device '", name, "' reports a maximum work-group size of ",
                           max_group, " and ", local_bytes,
                           " bytes of local memory; Braze's GPU schedules need 256 "
                           "and 32 KiB"));
        }
      }
      if (l->devices.empty())
        l->first_is_cpu = (type & (kDeviceTypeGpu | kDeviceTypeCpu)) == kDeviceTypeCpu;
      l->devices.push_back(absl::StrCat(name, " (", kind, ")"));
    }
  }
  if (l->devices.empty()) {
    l->status = absl::FailedPreconditionError(
        "OpenCL is not available: no OpenCL platform with a device (is an ICD driver such "
        "as pocl-opencl-icd installed?)");
  }
}

// The listing the probe sends back: the Status on its first line (code, message),
// then "D <device>" per device and "E <opencl:0's extensions>".
std::string SerializeListing(const Loader& l) {
  std::string message(l.status.message());
  std::replace(message.begin(), message.end(), '\n', ' ');
  std::string out = absl::StrCat(static_cast<int>(l.status.code()), " ", message, "\n");
  for (const std::string& d : l.devices) absl::StrAppend(&out, "D ", d, "\n");
  absl::StrAppend(&out, "E ", l.extensions, "\n");
  return out;
}

// SerializeListing's text back into `l`; false when it is not that (a probe cut short).
bool ParseListing(const std::string& text, Loader* l) {
  const size_t first = text.find('\n');
  if (first == std::string::npos) return false;
  const size_t space = text.find(' ');
  if (space == std::string::npos || space > first) return false;
  const int code = std::atoi(text.substr(0, space).c_str());
  l->status =
      absl::Status(static_cast<absl::StatusCode>(code), text.substr(space + 1, first - space - 1));
  for (size_t at = first + 1; at < text.size();) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(at, end - at);
    if (line.rfind("D ", 0) == 0) l->devices.push_back(line.substr(2));
    if (line.rfind("E ", 0) == 0) l->extensions = line.substr(2);
    at = end + 1;
  }
  return true;
}

// What braze-opencl-probe does (OpenCLProbeMain, device/opencl_probe.h): loads and lists
// the drivers (LoadAndList) and writes what it found to `data_fd` after `header`; with
// `run_kernel`, when opencl:0 is not a CPU device, it then does everything a process
// using them does: a one-kernel Halide pipeline on opencl:0 through Halide's OpenCL
// runtime and Braze's handlers, as a compiled cluster runs (RunOpenCLProbeKernel: context,
// queue, buffers, clBuildProgram, a launch, copies back, the values checked). NVIDIA's
// OpenCL driver passed a load-and-list probe on an H200 machine, then aborted
// runtime_tests with std::bad_cast once a cluster ran (2026-11-29). Exits as
// OpenCLProbeMain says.
int ProbeProcess(int data_fd, const std::string& header, bool run_kernel) {
  try {
    Loader probed;
    LoadAndList(&probed);
    const std::string listing = header + SerializeListing(probed);
    for (size_t at = 0; at < listing.size();) {
      const ssize_t wrote = write(data_fd, listing.data() + at, listing.size() - at);
      if (wrote < 0 && errno == EINTR) continue;
      if (wrote <= 0) break;
      at += static_cast<size_t>(wrote);
    }
    // Not on a CPU device (POCL): CI runs thousands of kernels there in-process, and the
    // pipeline's JIT (Halide's OpenCL runtime modules: 1-3 s) would be paid by every
    // process that uses OpenCL, twice (in the probe, then in the process).
    if (run_kernel && probed.status.ok() && !probed.first_is_cpu) {
      probe_loader = &probed;
      const absl::Status kernel = RunOpenCLProbeKernel();
      if (!kernel.ok()) {
        dprintf(2, "%s\n", std::string(kernel.message()).c_str());
        return 3;
      }
    }
  } catch (const std::exception& e) {
    dprintf(2, "a driver threw %s\n", e.what());
    return 2;
  } catch (...) {
    dprintf(2, "a driver threw an exception\n");
    return 2;
  }
  return 0;
}

// OpenCL unavailable for the reason `why` (ChooseDrivers' Status): the drivers failed the
// probe, or the probe could not be run (kUnavailable: then no driver was judged).
absl::Status Unavailable(const absl::Status& why) {
  return absl::FailedPreconditionError(absl::StrCat(
      "OpenCL is not available: ", why.message(),
      absl::IsUnavailable(why) ? "" : "; loading them here would end this program the same way"));
}

// The .icd files of `dir` (each names one driver), sorted.
std::vector<std::string> IcdFiles(const std::string& dir) {
  std::vector<std::string> files;
  if (DIR* d = opendir(dir.c_str())) {
    while (const dirent* entry = readdir(d)) {
      const std::string name = entry->d_name;
      if (name.size() > 4 && name.compare(name.size() - 4, 4, ".icd") == 0) files.push_back(name);
    }
    closedir(d);
  }
  std::sort(files.begin(), files.end());
  return files;
}

// A fresh directory under $TMPDIR (or /tmp) holding copies of `files` from `from`: a
// vendors directory naming only those drivers. Empty when it cannot be made.
std::string VendorsDirWith(const std::string& from, const std::vector<std::string>& files) {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern =
      absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", "/braze_opencl_vendors_XXXXXX");
  if (mkdtemp(pattern.data()) == nullptr) return "";
  for (const std::string& f : files) {
    std::ifstream in(from + "/" + f);
    std::ofstream out(pattern + "/" + f);
    out << in.rdbuf();
  }
  return pattern;
}

void RemoveVendorsDir(const std::string& dir, const std::vector<std::string>& files) {
  for (const std::string& f : files) std::remove((dir + "/" + f).c_str());
  rmdir(dir.c_str());
}

// The drivers the probe (device/opencl_probe.h) passed with: `*keep` the .icd files of
// VendorsDir() to load (empty: all installed, the directory as it is), `*left_out` why
// each other one was left out, `*listing` the passing probe's SerializeListing. The
// candidates are `from` (empty: all installed). When they fail together, each is probed
// alone, and those that passed are kept (all of them when they pass together again, else
// the first). A Status when none passed; kUnavailable, at once, when the probe could not
// be run at all. `run_kernel` as RunOpenCLProbe's.
struct Choice {
  std::vector<std::string> keep;
  std::string left_out;
  std::string listing;
};

absl::Status ChooseDrivers(const std::vector<std::string>& from, bool run_kernel, Choice* c) {
  const std::string dir = VendorsDir();
  // Probes the drivers `files` (empty: the installed directory itself).
  auto probe = [&](const std::vector<std::string>& files, std::string* listing) {
    if (files.empty()) return RunOpenCLProbe(dir, run_kernel, listing);
    const std::string only = VendorsDirWith(dir, files);
    if (only.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot create a directory in $TMPDIR "
                       "for a subset of the drivers of ",
                       dir));
    }
    const absl::Status s = RunOpenCLProbe(only, run_kernel, listing);
    RemoveVendorsDir(only, files);
    return s;
  };
  const absl::Status all = probe(from, &c->listing);
  if (all.ok()) {
    c->keep = from;
    return all;
  }
  if (absl::IsUnavailable(all)) return all;  // no driver was judged: probing each is no better
  const std::vector<std::string> files = from.empty() ? IcdFiles(dir) : from;
  if (files.size() <= 1) return all;
  std::vector<std::string> passed, failed, listings;
  for (const std::string& f : files) {
    std::string listing;
    const absl::Status s = probe({f}, &listing);
    if (s.ok()) {
      passed.push_back(f);
      listings.push_back(listing);
    } else {
      failed.push_back(absl::StrCat(f, ": ", s.message()));
    }
  }
  if (passed.empty()) {
    std::string why;
    for (const std::string& f : failed) absl::StrAppend(&why, why.empty() ? "" : "; ", f);
    return absl::FailedPreconditionError(why);
  }
  c->listing = listings[0];
  if (passed.size() > 1) {
    std::string listing;
    const absl::Status s = probe(passed, &listing);
    if (s.ok()) {
      c->listing = listing;
    } else {
      failed.push_back(absl::StrCat(passed.size() - 1, " more that passed alone but not with ",
                                    passed[0], ": ", s.message()));
      passed.resize(1);
    }
  }
  c->keep = passed;
  if (failed.empty()) {
    failed.push_back(absl::StrCat("nothing (together they failed once: ", all.message(), ")"));
  }
  for (const std::string& f : failed) {
    absl::StrAppend(&c->left_out, c->left_out.empty() ? "" : "; ", f);
  }
  return absl::OkStatus();
}

// Runs LoadAndList(l) here with the ICD loader reading only the drivers `keep` of
// VendorsDir() (all of them when empty). The loader reads OCL_ICD_VENDORS once, when it
// first lists the platforms, so the variable is set for that call only and the user's
// value (or its absence) restored.
void LoadAndListOnly(const std::vector<std::string>& keep, Loader* l) {
  if (keep.empty()) {
    LoadAndList(l);
    return;
  }
  const std::string dir = VendorsDir();
  const char* old = std::getenv("OCL_ICD_VENDORS");
  const std::string old_value = old != nullptr ? old : "";
  const std::string chosen = VendorsDirWith(dir, keep);
  SetEnvironmentVariable("OCL_ICD_VENDORS", chosen, /*overwrite=*/true);
  LoadAndList(l);
  if (old != nullptr) {
    SetEnvironmentVariable("OCL_ICD_VENDORS", old_value, /*overwrite=*/true);
  } else {
    UnsetEnvironmentVariable("OCL_ICD_VENDORS");
  }
  RemoveVendorsDir(chosen, keep);
}

// The installed drivers' platforms and devices as the probe's process listed them (each
// driver alone when together they failed), without loading any driver here: what
// "auto" device selection asks (ListedOpenCLDevices), for the cost of one probe. Never
// listed here: without the probe (not found, not started), OpenCL is unavailable.
struct Listing {
  Loader loader;
  Choice choice;
};

const Listing& TheListing() {
  static const Listing* listing = [] {
    auto* l = new Listing();
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    // The sanitizer runtimes refuse RTLD_DEEPBIND (google/sanitizers#611), and without
    // it POCL's LLVM binds to Halide's: no OpenCL in ASan and TSan builds.
    l->loader.status = absl::FailedPreconditionError(
        "OpenCL is not available in ASan/TSan builds: the drivers' deep binding "
        "(src/device/opencl_driver.h) is incompatible with the sanitizer runtimes");
    return l;
#endif
    const absl::Status s = ChooseDrivers({}, /*run_kernel=*/false, &l->choice);
    if (!s.ok()) {
      l->loader.status = Unavailable(s);
      // Drivers installed but never tried (no probe to run): said once, not only to
      // those who ask for OpenCL, since "auto" quietly picks another device then.
      if (absl::IsUnavailable(s) && !IcdFiles(VendorsDir()).empty()) {
        LogWarning(std::string(l->loader.status.message()));
      }
    } else if (!ParseListing(l->choice.listing, &l->loader)) {
      l->loader.status = absl::FailedPreconditionError(
          absl::StrCat("OpenCL is not available: the OpenCL probe's listing of the drivers of ",
                       VendorsDir(), " could not be read"));
    }
    return l;
  }();
  return *listing;
}

// The drivers loaded here for use, after the listing and the kernel probe passed in
// the probe's processes with them: only those that passed both.
const Loader& TheLoader() {
  static const Loader* loader = [] {
    auto* l = new Loader();
    const Listing& listed = TheListing();
    if (!listed.loader.status.ok()) {
      l->status = listed.loader.status;
      return l;
    }
    Choice choice;
    if (absl::Status s = ChooseDrivers(listed.choice.keep, /*run_kernel=*/true, &choice); !s.ok()) {
      l->status = Unavailable(s);
      return l;
    }
    LoadAndListOnly(choice.keep, l);
    std::string left_out = listed.choice.left_out;
    if (!choice.left_out.empty()) {
      absl::StrAppend(&left_out, left_out.empty() ? "" : "; ", choice.left_out);
    }
    if (l->status.ok() && !left_out.empty()) {
      LogWarning(absl::StrCat("OpenCL: using the drivers of ", VendorsDir(),
                              " that passed the probe (", absl::StrJoin(choice.keep, ", "),
                              ") and leaving out: ", left_out));
    }
    return l;
  }();
  return *loader;
}

// The probe's Loader in braze-opencl-probe, else this process's.
const Loader& CurrentLoader() { return probe_loader != nullptr ? *probe_loader : TheLoader(); }

}  // namespace

void* LoadLibraryIsolated(const char* name) {
  if (std::strncmp(name, "libOpenCL.so", 12) == 0) return CurrentLoader().handle;
  return dlopen(name, RTLD_LAZY);
}

void* GetLibrarySymbol(void* lib, const char* name) { return dlsym(lib, name); }

bool OpenCLDeviceHasExtension(const std::string& name) {
  const Loader& l = CurrentLoader();
  if (!l.status.ok() || name.empty() || name.find(' ') != std::string::npos) return false;
  // Whole names only: the list is separated by spaces.
  const std::string list = " " + l.extensions + " ";
  return list.find(" " + name + " ") != std::string::npos;
}

namespace {
// Ends braze-opencl-probe with `code`, in either mode, without running the drivers'
// atexit handlers or destructors: a driver that aborts while unloading has been judged
// already, and would otherwise turn a listing into a crash.
[[noreturn]] int ExitProbe(int code) {
  std::fflush(nullptr);
  _exit(code);
}
}  // namespace

int OpenCLProbeMain(int argc, char** argv) {
  bool run_kernel = false;
  int protocol = 0;  // 0: run by hand
  const char* build = nullptr;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--kernel") {
      run_kernel = true;
    } else if (arg.rfind("--protocol=", 0) == 0) {
      if (!absl::SimpleAtoi(arg.substr(11), &protocol) || protocol <= 0) {
        dprintf(2, "braze-opencl-probe: '%s' is not a protocol number\n", arg.c_str());
        return ExitProbe(64);
      }
    } else if (arg.rfind("--build=", 0) == 0) {
      build = argv[i] + 8;
    } else {
      dprintf(2, "braze-opencl-probe: unknown argument '%s' (usage: %s [--kernel])\n", arg.c_str(),
              argv[0]);
      return ExitProbe(64);
    }
  }
  if (protocol == 0 && build == nullptr) return ExitProbe(ProbeProcess(1, "", run_kernel));
  if (protocol != kOpenCLProbeProtocol) {
    dprintf(2, "braze-opencl-probe: protocol %d asked, this probe speaks %d\n", protocol,
            kOpenCLProbeProtocol);
    return ExitProbe(64);
  }
  if (build == nullptr || std::strcmp(build, OpenCLProbeBuildId()) != 0) {
    dprintf(2, "braze-opencl-probe: build %s asked, this probe is of build %s\n",
            build != nullptr ? build : "(none)", OpenCLProbeBuildId());
    return ExitProbe(64);
  }
  return ExitProbe(ProbeProcess(3, OpenCLProbeHeader(), run_kernel));
}

}  // namespace device

absl::Status CheckOpenCLAvailable() { return device::TheLoader().status; }

std::vector<std::string> OpenCLDevices() { return device::TheLoader().devices; }

namespace device {

std::vector<std::string> ListedOpenCLDevices() { return TheListing().loader.devices; }

}  // namespace device

}  // namespace braze
