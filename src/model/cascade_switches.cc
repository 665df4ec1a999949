#include "model/cascade_switches.h"

#include <cstdlib>
#include <string>

namespace folio {
namespace {

// *value = the variable `name`, which must be `a` or `b` where set ("" if unset).
Status one_of(const std::function<const char*(const char*)>& getenv, const char* name,
              const char* a, const char* b, std::string* value) {
  const char* e = getenv(name);
  *value = e != nullptr ? e : "";
  if (e == nullptr || *value == a || *value == b) return Status();
  return invalid_argument(std::string(name) + "=" + *value + ": expected " + a + " or " + b);
}

}  // namespace

Result<CascadeSwitches> read_cascade_switches(
    int world, KvCacheDtype kv, const std::function<const char*(const char*)>& getenv) {
  CascadeSwitches s;
  s.min_saving = cascade_default_min_saving(kv);
  std::string v;
  FOLIO_RETURN_IF_ERROR(one_of(getenv, "FOLIO_CASCADE_ATTENTION", "0", "1", &v));
  s.requested = v.empty() ? world == 1 : v == "1";
  FOLIO_RETURN_IF_ERROR(one_of(getenv, "FOLIO_CASCADE_WIDE", "0", "1", &v));
  if (!v.empty()) s.wide = v == "1";
  FOLIO_RETURN_IF_ERROR(one_of(getenv, "FOLIO_CASCADE_PACKS", "all", "one-row", &v));
  if (!v.empty()) s.pack_one_row_only = v == "one-row";
  FOLIO_RETURN_IF_ERROR(one_of(getenv, "FOLIO_CASCADE_GRAPHS", "0", "1", &v));
  if (!v.empty()) s.graphs = v == "1";
  if (const char* e = getenv("FOLIO_CASCADE_STAGES")) {
    const std::string st = e;
    const bool fp8 = kv == KvCacheDtype::kFp8E4m3;
    if (st != "2" && st != "3" && !(fp8 && st == "4"))
      return invalid_argument("FOLIO_CASCADE_STAGES=" + st + ": expected 2 or 3" +
                              (fp8 ? " or 4" : " (4 over an fp8 cache)"));
    s.wgmma_stages = st[0] - '0';
  }
  if (const char* m = getenv("FOLIO_CASCADE_MIN_SAVING")) {
    char* end = nullptr;
    const double f = std::strtod(m, &end);
    if (end == m || *end != '\0' || !(f >= 0 && f < 1))
      return invalid_argument(std::string("FOLIO_CASCADE_MIN_SAVING=") + m +
                              ": expected a fraction in [0, 1)");
    s.min_saving = f;
  }
  return s;
}

double cascade_default_min_saving(KvCacheDtype kv) {
  return kv == KvCacheDtype::kFp8E4m3 ? 0.6 : 0.3;
}

}  // namespace folio
