// Emulated stand-in for src/backend/cuda/setmaxnreg_ptx.cuh: host threads have no register file
// to share, so register reallocation does nothing (the count checks stay).
#pragma once

namespace folio::cuda {

template <int kRegs>
inline void setmaxnreg_inc() {
  static_assert(kRegs % 8 == 0 && kRegs >= 24 && kRegs <= 256, "setmaxnreg count");
}

template <int kRegs>
inline void setmaxnreg_dec() {
  static_assert(kRegs % 8 == 0 && kRegs >= 24 && kRegs <= 256, "setmaxnreg count");
}

}  // namespace folio::cuda
