// MainWindow's navigation: every move between the views goes through navigate(), which
// records it, and apply(), which shows it; breadcrumbs and back/forward follow from there.
#include <QComboBox>
#include <QTabWidget>

#include "BreadcrumbBar.h"
#include "ElementProfileController.h"
#include "ErrorGrids.h"
#include "HeatmapFilterBar.h"
#include "HeatmapView.h"
#include "MainWindow.h"
#include "TensorDetailPanel.h"

namespace ttrace {

void MainWindow::showTensor(std::size_t resultIndex, std::optional<int> rank) {
    if (!report_ || resultIndex >= report_->comparison.results.size()) {
        return;
    }
    Location next = location();
    next.result = resultIndex;
    next.rank = rank;
    if (next.view == Location::View::LayerRanks) {
        const int layer = report_->comparison.results[resultIndex].layer;
        if (layer != next.layer) {
            next.ranks = {};
        }
        next.layer = layer;
    }
    navigate(next);
}

void MainWindow::navigate(const Location& location) {
    history_.visit(location);
    apply(history_.current());
}

void MainWindow::goBack() {
    apply(history_.back());
}

void MainWindow::goForward() {
    apply(history_.forward());
}

void MainWindow::apply(const Location& location) {
    applying_ = true;
    if (location.view == Location::View::LayerRanks && report_) {
        const int index = layerChoice_->findData(location.layer);
        layerChoice_->setCurrentIndex(index);
        rankHeatmap_->setGrid(
            rankLayerGrid(*report_, location.layer, filterBar_->filter(), location.ranks));
        views_->setCurrentIndex(kRanksTab);
    } else {
        views_->setCurrentIndex(kLayersTab);
    }
    if (location.result && report_) {
        const bool newTensor = detail_->currentResult() != location.result;
        heatmap_->selectResult(*location.result);
        rankHeatmap_->selectResult(*location.result, location.rank);
        detail_->showResult(*location.result, location.rank);
        // The element view shows the selected rank's copy, else each shard's worst copy.
        if (newTensor || profiledRank_ != location.rank) {
            const TensorResult& result = report_->comparison.results[*location.result];
            profiledRank_ = location.rank;
            profiles_->request(report_->distributed.folder, report_->reference.folder, result.key,
                               location.rank
                                   ? std::vector<int>{*location.rank}
                                   : worstCopyRanks(*report_->shardsOf(*location.result)));
        }
    } else if (detail_->currentResult()) {
        profiles_->cancel();
        detail_->setReport(report_);  // back at a level above any tensor
    }
    applying_ = false;
    updateBreadcrumbs();
    setChecking(isChecking());
}

void MainWindow::updateBreadcrumbs() {
    QStringList crumbs{report_ ? QStringLiteral("Run ") + folders_.displayName()
                               : QStringLiteral("No run open")};
    // Each crumb goes up to the location it names: the run, the layer's ranks, the block of
    // ranks expanded, the tensor (on the view it was opened from).
    crumbTargets_ = {Location{}};
    const Location& at = location();
    if (report_) {
        std::optional<int> layer;
        if (at.view == Location::View::LayerRanks) {
            layer = at.layer;
        } else if (at.result) {
            layer = report_->comparison.results[*at.result].layer;
        }
        Location up;
        if (layer) {
            crumbs << layerName(*layer);
            up.view = Location::View::LayerRanks;
            up.layer = *layer;
            crumbTargets_.push_back(up);
        }
        if (at.view == Location::View::LayerRanks && !at.ranks.all()) {
            crumbs << rankBoxLabel(report_->distributed.manifest, at.ranks);
            up.ranks = at.ranks;
            crumbTargets_.push_back(up);
        }
        if (at.result) {
            crumbs << report_->comparison.results[*at.result].key.toString();
            up.view = at.view;
            up.result = at.result;
            crumbTargets_.push_back(up);
        }
        if (at.rank) {
            crumbs << QStringLiteral("rank %1").arg(*at.rank);
            crumbTargets_.push_back(at);
        }
    }
    breadcrumbs_->setCrumbs(crumbs);
}

void MainWindow::onCrumb(int level) {
    if (!report_ || level < 0 || static_cast<std::size_t>(level) >= crumbTargets_.size()) {
        return;
    }
    navigate(crumbTargets_[static_cast<std::size_t>(level)]);
}

void MainWindow::onViewTabChanged(int index) {
    if (applying_ || !report_) {
        return;
    }
    Location next = location();
    if (index == kRanksTab) {
        next.view = Location::View::LayerRanks;
        const int layer = next.result ? report_->comparison.results[*next.result].layer
                                      : layerChoice_->currentData().toInt();
        if (layer != next.layer) {
            next.ranks = {};
        }
        next.layer = layer;
    } else {
        next.view = Location::View::Layers;
    }
    navigate(next);
}

void MainWindow::showRanksOfLayer() {
    if (!report_ || report_->comparison.results.empty()) {
        return;
    }
    Location next = location();
    const auto shown = next.result ? next.result : report_->localization.firstFaulty;
    next.view = Location::View::LayerRanks;
    const int layer =
        shown ? report_->comparison.results[*shown].layer : layerChoice_->currentData().toInt();
    if (layer != next.layer) {
        next.ranks = {};
    }
    next.layer = layer;
    navigate(next);
}

void MainWindow::applyFilter(const HeatmapFilter& filter) {
    if (!report_ || !layerLayout_) {
        return;
    }
    const Location& at = location();
    heatmap_->setGrid(layerErrorGrid(*report_, *layerLayout_, filter));
    if (at.view == Location::View::LayerRanks) {
        rankHeatmap_->setGrid(rankLayerGrid(*report_, at.layer, filter, at.ranks));
    }
    if (at.result) {
        heatmap_->selectResult(*at.result);
        rankHeatmap_->selectResult(*at.result, at.rank);
    }
}

void MainWindow::goToFirstFault() {
    if (!report_ || !report_->localization.firstFaulty) {
        return;
    }
    const std::size_t first = *report_->localization.firstFaulty;
    // A filter hiding the first fault would make the action look broken: it goes.
    if (!filterBar_->filter().shows(report_->comparison.results[first])) {
        filterBar_->setFilter(HeatmapFilter());
    }
    Location next;
    next.result = first;
    navigate(next);
}

}  // namespace ttrace
