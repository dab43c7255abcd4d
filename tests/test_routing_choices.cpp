// routingChoicesBeyondRoundOff: a router of the distributed run is named when its own top-k
// choices differ from the reference's on more tokens than the perturbed reference's rate of
// round-off flips explains; the Poisson tail it rests on.
#include <QTest>

#include "compare/RoutingChoiceCheck.h"

using namespace ttrace;

namespace {

RoutingChoices counts(const char* router, qint64 tokens, qint64 differing) {
    return {QString::fromLatin1(router), tokens, differing};
}

}  // namespace

class TestRoutingChoices : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void poissonTailMatchesItsSums() {
        // P(X >= 3 | mean 1) = 1 - e^-1 (1 + 1 + 1/2)
        QVERIFY(std::abs(poissonTail(1.0, 3) - (1.0 - std::exp(-1.0) * 2.5)) < 1e-12);
        // P(X >= 20 | mean 2), from its terms
        double sum = 0.0;
        for (int k = 20; k < 80; ++k) {
            sum += std::exp(-2.0 + k * std::log(2.0) - std::lgamma(k + 1.0));
        }
        QVERIFY(std::abs(poissonTail(2.0, 20) / sum - 1.0) < 1e-9);
        QCOMPARE(poissonTail(5.0, 0), 1.0);
        QCOMPARE(poissonTail(5.0, 4), 1.0);  // below the mean
        QCOMPARE(poissonTail(0.0, 1), 0.0);
        QVERIFY(poissonTail(1.0, 1000) < 1e-300 || poissonTail(1.0, 1000) == 0.0);
    }

    void roundOffFlipsAreNotNamed() {
        // torchtitan's Qwen3-MoE in bf16: the distributed run flips 2 of 512, the perturbed
        // reference 13 of 1024
        const auto findings = routingChoicesBeyondRoundOff({counts("moe.router", 512, 2)},
                                                           {counts("moe.router", 1024, 13)}, {});
        QVERIFY(findings.empty());
        // no flips in a perturbed reference of 1024 tokens: a few in the run are still round-off
        QVERIFY(routingChoicesBeyondRoundOff({counts("r", 512, 3)}, {counts("r", 1024, 0)}, {})
                    .empty());
    }

    void aWrongChoiceIsNamedWithItsCounts() {
        const auto findings = routingChoicesBeyondRoundOff(
            {counts("layers.0.moe.router", 512, 2), counts("layers.1.moe.router", 512, 300)},
            {counts("layers.0.moe.router", 1024, 13), counts("layers.1.moe.router", 1024, 9)}, {});
        QCOMPARE(findings.size(), std::size_t{1});
        QCOMPARE(findings[0].router, QStringLiteral("layers.1.moe.router"));
        QCOMPARE(findings[0].distributed.differing, qint64{300});
        QVERIFY(std::abs(findings[0].expected - 5.0) < 1e-12);  // (9 + 1) / 1024 * 512

        Diagnostics diagnostics;
        warnRoutingChoices(findings, QStringLiteral("/traces/dist"), diagnostics);
        QCOMPARE(diagnostics.size(), std::size_t{1});
        QCOMPARE(diagnostics[0].severity, Severity::Warning);
        QCOMPARE(diagnostics[0].file, QStringLiteral("/traces/dist"));
        QVERIFY2(diagnostics[0].message.startsWith(QStringLiteral(
                     "layers.1.moe.router: the distributed run's own top-k choices differ from "
                     "the reference's on 300 of 512 tokens, where round-off near ties explains "
                     "about 5 (the perturbed reference's own choices differ on 9 of 1024)")),
                 qPrintable(diagnostics[0].message));
    }

    void aRouterThePerturbedReferenceDidNotCountIsNotJudged() {
        QVERIFY(routingChoicesBeyondRoundOff({counts("r", 512, 500)}, {}, {}).empty());
        QVERIFY(routingChoicesBeyondRoundOff({counts("r", 512, 500)}, {counts("s", 512, 0)}, {})
                    .empty());
    }

    void aRouterWhoseInputIsFaultyIsNotNamed() {
        // its choices follow from its input: the tensors already show the bug upstream
        TensorResult input;
        input.key.name = QStringLiteral("layers.1.moe.router");
        input.key.kind = TensorKind::ForwardInput;
        input.normalizedError = 3.0;
        const std::vector<RoutingChoices> mine{counts("layers.1.moe.router", 512, 44)};
        const std::vector<RoutingChoices> theirs{counts("layers.1.moe.router", 512, 6)};
        QVERIFY(routingChoicesBeyondRoundOff(mine, theirs, {input}).empty());
        input.normalizedError = 0.5;
        QCOMPARE(routingChoicesBeyondRoundOff(mine, theirs, {input}).size(), std::size_t{1});
    }
};

QTEST_GUILESS_MAIN(TestRoutingChoices)
#include "test_routing_choices.moc"
