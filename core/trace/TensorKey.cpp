#include "trace/TensorKey.h"

#include <array>
#include <tuple>

namespace ttrace {

namespace {
constexpr std::array<const char16_t*, kTensorKindCount> kKindNames = {
    u"forward_input", u"forward_output", u"output_grad", u"input_grad",
    u"param",         u"param_grad",     u"main_grad",   u"updated_param",
};
}  // namespace

std::optional<TensorKind> tensorKindFromName(QStringView name) {
    for (int i = 0; i < kTensorKindCount; ++i) {
        if (name == QStringView(kKindNames[static_cast<std::size_t>(i)])) {
            return static_cast<TensorKind>(i);
        }
    }
    return std::nullopt;
}

QString tensorKindName(TensorKind kind) {
    return QString::fromUtf16(kKindNames[static_cast<std::size_t>(kind)]);
}

bool isParameterKind(TensorKind kind) {
    return kind == TensorKind::Param || kind == TensorKind::ParamGrad ||
           kind == TensorKind::MainGrad || kind == TensorKind::UpdatedParam;
}

bool isBackwardKind(TensorKind kind) {
    return kind == TensorKind::OutputGrad || kind == TensorKind::InputGrad ||
           kind == TensorKind::ParamGrad || kind == TensorKind::MainGrad;
}

QString TensorKey::kindText() const {
    if (isParameterKind(kind)) {
        return tensorKindName(kind);
    }
    return tensorKindName(kind) + QLatin1Char('[') + QString::number(index) + QLatin1Char(']');
}

QString TensorKey::toString() const {
    QString text = name + QLatin1Char(' ') + kindText();
    text += QStringLiteral(" it") + QString::number(iteration);
    if (!isParameterKind(kind)) {
        text += QStringLiteral(" mb") + QString::number(microBatch);
    }
    return text;
}

QString TensorKey::module() const {
    if (!isParameterKind(kind)) {
        return name;
    }
    const auto dot = name.lastIndexOf(QLatin1Char('.'));
    return dot < 0 ? name : name.left(dot);
}

bool operator<(const TensorKey& a, const TensorKey& b) {
    return std::tie(a.name, a.kind, a.index, a.iteration, a.microBatch) <
           std::tie(b.name, b.kind, b.index, b.iteration, b.microBatch);
}

}  // namespace ttrace
