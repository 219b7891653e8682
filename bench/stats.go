package bench

import (
	"math"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// Histograms record nanoseconds from 1 µs (the precision at the low end)
// up to 10 minutes with 3 significant digits: about 0.1% error, and a few
// hundred KiB per histogram, so every worker keeps its own (no lock on the
// hot path) and they are merged at the end.
const (
	histLowest  = int64(time.Microsecond)
	histHighest = int64(10 * time.Minute)
	histDigits  = 3
)

// Hist is a latency histogram. It is not safe for concurrent use.
type Hist struct {
	h *hdr.Histogram
	// negative counts samples below zero (recorded as zero): a hand-off
	// whose ACQUIRED response was seen before its release's reply.
	negative int64
}

// NewHist returns an empty histogram.
func NewHist() *Hist { return &Hist{h: hdr.New(histLowest, histHighest, histDigits)} }

// Record adds one sample. Below zero counts as zero (and in Negative);
// above the highest trackable value counts as that value.
func (h *Hist) Record(d time.Duration) {
	v := int64(d)
	if v < 0 {
		h.negative++
		v = 0
	}
	if v > histHighest {
		v = histHighest
	}
	_ = h.h.RecordValue(v) // in range by construction
}

// Merge adds every sample of o.
func (h *Hist) Merge(o *Hist) {
	h.h.Merge(o.h)
	h.negative += o.negative
}

// Summary is a latency distribution in milliseconds.
type Summary struct {
	N        int64   `json:"n"`
	Mean     float64 `json:"mean_ms"`
	P50      float64 `json:"p50_ms"`
	P90      float64 `json:"p90_ms"`
	P99      float64 `json:"p99_ms"`
	P999     float64 `json:"p999_ms"`
	Max      float64 `json:"max_ms"`
	Negative int64   `json:"negative,omitempty"`
}

// Summary computes the distribution's summary.
func (h *Hist) Summary() Summary {
	n := h.h.TotalCount()
	if n == 0 {
		return Summary{}
	}
	q := func(p float64) float64 { return nsToMs(float64(h.h.ValueAtQuantile(p))) }
	return Summary{N: n, Mean: nsToMs(h.h.Mean()), P50: q(50), P90: q(90), P99: q(99), P999: q(99.9),
		Max: nsToMs(float64(h.h.Max())), Negative: h.negative}
}

func nsToMs(ns float64) float64 { return math.Round(ns/1e3) / 1e3 }
