#pragma once

#include <QString>
#include <QStringView>
#include <cstddef>
#include <cstdint>
#include <optional>

namespace ttrace {

// The dtype a tensor was computed in, and so how its stored words decode (trace-format.md).
enum class DType { F32, F16, BF16, FP8E4M3, FP8E5M2, FP4E2M1 };
// How many there are: what a decoder of a DType sent as a number holds it to.
constexpr int kDTypeCount = static_cast<int>(DType::FP4E2M1) + 1;

std::optional<DType> dtypeFromName(QStringView name);
QString dtypeName(DType dtype);
// fp8 e4m3 or e5m2, and fp4 e2m1: stored values decode through their scale_inv (BlockScales).
bool isScaled(DType dtype);
// What reports call a scaled dtype's family: "fp4" for fp4, "fp8" otherwise.
QString scaledFamily(DType dtype);
// Bytes one stored word takes in a rank file: the HDF5 element of the dataset.
int storageBytes(DType dtype);
// Elements one stored word holds: fp4's byte holds two, packed along the dataset's last
// dimension (trace-format.md); every other dtype one.
int elementsPerWord(DType dtype);
// Machine epsilon of the dtype as a compute dtype: fp32 2^-23, bf16 2^-7, fp16 2^-10; fp8
// and fp4 recipes compute in bf16, so they return bf16's epsilon.
double machineEpsilon(DType dtype);
// The spacing of the dtype's own numbers, relative (2^-mantissa bits): fp8 e4m3 2^-3, e5m2
// 2^-2, fp4 e2m1 2^-1; for the others their machine epsilon. What rounding an operand to a
// recipe's element format costs it, whatever its scale.
double elementEpsilon(DType dtype);

// Decodes n stored elements into floats, exactly: every supported dtype fits in fp32. fp8 and
// fp4 values come out unscaled; BlockScales::apply multiplies them by their scale_inv. For
// fp4, `skip` elements (nibbles) of the first word are passed over: a box of a packed row can
// start in the middle of a byte.
void decode(DType dtype, const void* stored, float* out, std::size_t n, std::size_t skip = 0);

}  // namespace ttrace
