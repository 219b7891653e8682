package btree

import "flag"

// Definitions the upstream generic tests take from upstream's btree_test.go
// (the non-generic API, which this copy leaves out).
var btreeDegree = flag.Int("degree", 32, "B-Tree degree")

const benchmarkTreeSize = 10000
const cloneTestSize = 10000
