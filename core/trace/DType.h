#pragma once

#include <QString>
#include <QStringView>
#include <cstddef>
#include <cstdint>
#include <optional>

namespace ttrace {

// The dtype a tensor was computed in, and so how its stored words decode (trace-format.md).
enum class DType { F32, F16, BF16, FP8E4M3, FP8E5M2 };

std::optional<DType> dtypeFromName(QStringView name);
QString dtypeName(DType dtype);
// fp8 e4m3 or e5m2: stored values decode through their scale_inv (BlockScales).
bool isFp8(DType dtype);
// Bytes one stored element takes in a rank file.
int storageBytes(DType dtype);
// Machine epsilon of the dtype as a compute dtype: fp32 2^-23, bf16 2^-7, fp16 2^-10; fp8
// recipes compute in bf16, so fp8 returns bf16's epsilon.
double machineEpsilon(DType dtype);

// Decodes n stored elements into floats, exactly: every supported dtype fits in fp32. fp8
// values come out unscaled; BlockScales::apply multiplies them by their scale_inv.
void decode(DType dtype, const void* stored, float* out, std::size_t n);

}  // namespace ttrace
