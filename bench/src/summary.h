// arbiter-bench's summary figures: each section's table reduced to the lines the
// results page and stdout end with (bench/README.md says what each means).
#pragma once

#include <string>
#include <vector>

#include "bench/src/service_section.h"
#include "bench/src/table.h"

namespace arbiter::bench {

double GeoMean(const std::vector<double>& v);
double Median(std::vector<double> v);
double Max(const std::vector<double>& v);
// The positive numbers of column `name` of `t`, row by row.
std::vector<double> Column(const Table& t, const std::string& name);

// One line per row of the selection table whose regret is over `bound`: why
// what was served was served (selection.csv has every row's reason and race).
std::string OverRegret(const Table& t, double bound);

// Per shape its fastest candidate against `vendor_name` and the floor, and how
// many second runs agreed with the first.
void AddKernelsSummary(const Table& kernels, const std::string& vendor_name, Table* summary);
// Served, the vendor alone and the tier default, each over the best per shape.
void AddSelectionSummary(const Table& selection, const std::string& vendor_name, Table* summary);
// Served from a bucket measured elsewhere, before and after refinement, and what
// refinement cost per shape.
void AddTransferSummary(const Table& transfer, Table* summary);
// Select against the empty RPC at `most_clients`, Matmul end to end on each path
// against its target, and the wire's receive rate.
void AddServiceSummary(const ServiceTables& service, const std::string& most_clients,
                       Table* summary);

}  // namespace arbiter::bench
