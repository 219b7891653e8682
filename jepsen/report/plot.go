package report

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"
	"sort"
	"time"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"

	"github.com/grackle-coord/grackle/jepsen/history"
)

// Plot size.
const (
	PlotWidth  = 1200
	PlotHeight = 500
)

// Layout of the plot.
const (
	left    = 62
	right   = PlotWidth - 16
	infoTop = 44 // band of indeterminate ops, above the plot area
	infoBot = 58
	top     = 64 // plot area
	bottom  = PlotHeight - 40
)

var (
	white = color.RGBA{255, 255, 255, 255}
	black = color.RGBA{0, 0, 0, 255}
	grey  = color.RGBA{120, 120, 120, 255}
	light = color.RGBA{228, 228, 228, 255}
)

// kindColors: one colour per op kind.
var kindColors = map[string]color.RGBA{
	history.Acquire:      {31, 119, 180, 255},
	history.Release:      {44, 160, 44, 255},
	history.GetSemaphore: {255, 127, 14, 255},
	history.ListHolders:  {148, 103, 189, 255},
	history.CreateLease:  {140, 86, 75, 255},
	history.Refresh:      {127, 127, 127, 255},
	history.Revoke:       {214, 39, 40, 255},
	history.FenceWrite:   {23, 190, 207, 255},
}

var kindOrder = []string{history.Acquire, history.Release, history.GetSemaphore, history.ListHolders,
	history.CreateLease, history.Refresh, history.Revoke, history.FenceWrite}

// nemesisColors shade the fault windows (translucent).
var nemesisColors = []color.NRGBA{
	{214, 39, 40, 40}, {255, 127, 14, 48}, {148, 103, 189, 44}, {140, 86, 75, 44},
	{227, 119, 194, 44}, {188, 189, 34, 52}, {23, 190, 207, 44}, {127, 127, 127, 44},
}

func colorOf(kind string) color.RGBA {
	if c, ok := kindColors[kind]; ok {
		return c
	}
	return black
}

type canvas struct{ img *image.RGBA }

func (c canvas) fill(r image.Rectangle, col color.Color) {
	draw.Draw(c.img, r, image.NewUniform(col), image.Point{}, draw.Over)
}

func (c canvas) hline(x0, x1, y int, col color.Color) { c.fill(image.Rect(x0, y, x1+1, y+1), col) }
func (c canvas) vline(x, y0, y1 int, col color.Color) { c.fill(image.Rect(x, y0, x+1, y1+1), col) }

func (c canvas) dashedV(x, y0, y1 int, col color.Color) {
	for y := y0; y <= y1; y += 6 {
		c.vline(x, y, min(y+3, y1), col)
	}
}

func (c canvas) text(x, y int, s string, col color.Color) {
	d := font.Drawer{Dst: c.img, Src: image.NewUniform(col), Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
	d.DrawString(s)
}

func textWidth(s string) int { return font.MeasureString(basicfont.Face7x13, s).Ceil() }

// square draws a filled marker; cross an x marker.
func (c canvas) square(x, y int, col color.Color) { c.fill(image.Rect(x-1, y-1, x+2, y+2), col) }

func (c canvas) cross(x, y int, col color.Color) {
	for d := -2; d <= 2; d++ {
		c.fill(image.Rect(x+d, y+d, x+d+1, y+d+1), col)
		c.fill(image.Rect(x+d, y-d, x+d+1, y-d+1), col)
	}
}

// WritePlot draws latency.png: the latency (completion - invoke, log ms)
// of every completed op against its invoke time, one colour per kind
// (failed ops as crosses), indeterminate ops as ticks in a band above the
// plot, nemesis windows shaded and labelled, the final heal dashed.
func WritePlot(w io.Writer, h *history.History) error {
	img := image.NewRGBA(image.Rect(0, 0, PlotWidth, PlotHeight))
	c := canvas{img}
	c.fill(img.Bounds(), white)

	// Ranges.
	end := h.Duration
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, o := range h.Ops {
		end = max(end, o.Invoke, o.Complete)
		if o.Outcome != history.Info {
			l := latencyMS(o)
			lo, hi = math.Min(lo, l), math.Max(hi, l)
		}
	}
	for _, n := range h.Nemeses {
		end = max(end, n.End)
	}
	end = max(end, h.HealedAt, h.ServedAgainAt, time.Second)
	if math.IsInf(lo, 1) {
		lo, hi = 1, 1000
	}
	const floor = 0.01 // ms: latencies below are drawn at the floor
	lo = math.Max(lo, floor)
	hi = math.Max(hi, lo)
	dlo := math.Floor(math.Log10(lo))
	dhi := math.Ceil(math.Log10(hi))
	if dhi <= dlo {
		dhi = dlo + 1
	}
	xOf := func(t time.Duration) int {
		return left + int(float64(right-left)*t.Seconds()/end.Seconds())
	}
	yOf := func(ms float64) int {
		ms = math.Max(ms, math.Pow(10, dlo))
		f := (math.Log10(ms) - dlo) / (dhi - dlo)
		return bottom - int(f*float64(bottom-top))
	}

	// Nemesis windows, shaded over the info band and the plot area.
	kindIdx := map[string]int{}
	for _, k := range nemesisKinds(h) {
		kindIdx[k] = len(kindIdx)
	}
	nems := append([]history.Nemesis(nil), h.Nemeses...)
	sort.Slice(nems, func(i, j int) bool { return nems[i].Start < nems[j].Start })
	for _, n := range nems {
		if _, ok := kindIdx[n.Kind]; !ok {
			kindIdx[n.Kind] = len(kindIdx)
		}
		col := nemesisColors[kindIdx[n.Kind]%len(nemesisColors)]
		x0, x1 := xOf(n.Start), max(xOf(n.End), xOf(n.Start)+1)
		c.fill(image.Rect(x0, infoTop, x1, bottom+1), col)
	}

	// Grid and axes.
	for d := dlo; d <= dhi; d++ {
		y := yOf(math.Pow(10, d))
		c.hline(left, right, y, light)
		c.text(left-6-textWidth(msLabel(d)), y+4, msLabel(d), black)
	}
	step := tickStep(end)
	for t := time.Duration(0); t <= end; t += step {
		x := xOf(t)
		c.vline(x, top, bottom, light)
		c.vline(x, bottom, bottom+4, black)
		l := fmt.Sprintf("%gs", t.Seconds())
		c.text(x-textWidth(l)/2, bottom+17, l, black)
	}
	c.hline(left, right, bottom, black)
	c.vline(left, top, bottom, black)
	c.hline(left, right, infoTop, light)
	c.hline(left, right, infoBot, light)
	c.text(left-textWidth("info")-6, infoBot-2, "info", black)
	c.text(6, (top+bottom)/2+4, "ms", black)
	c.text((left+right)/2-90, PlotHeight-6, "invoke time since start (s)", black)

	// Nemesis labels, staggered so neighbours do not overlap.
	lastEnd := []int{-1000, -1000, -1000}
	for _, n := range nems {
		x0 := xOf(n.Start) + 2
		l := n.Kind
		for row := 0; row < len(lastEnd); row++ {
			if x0 > lastEnd[row]+4 {
				col := nemesisColors[kindIdx[n.Kind]%len(nemesisColors)]
				y := top + 13 + 14*row
				c.fill(image.Rect(x0-1, y-11, x0+textWidth(l)+1, y+3), color.NRGBA{255, 255, 255, 190})
				c.text(x0, y, l, color.RGBA{col.R * 2 / 3, col.G * 2 / 3, col.B * 2 / 3, 255})
				lastEnd[row] = x0 + textWidth(l)
				break
			}
		}
	}
	if h.HealedAt > 0 {
		x := xOf(h.HealedAt)
		c.dashedV(x, infoTop, bottom, black)
		c.text(x-textWidth("healed")-3, bottom-4, "healed", black)
	}

	// Ops: completed ones by latency, indeterminate ones in the info band.
	for _, o := range h.Ops {
		col := colorOf(o.Kind)
		x := xOf(o.Invoke)
		switch o.Outcome {
		case history.Info:
			c.vline(x, infoTop+2, infoBot-2, col)
		case history.Fail:
			c.cross(x, yOf(latencyMS(o)), col)
		default:
			c.square(x, yOf(latencyMS(o)), col)
		}
	}

	// Title and legend.
	title := fmt.Sprintf("latency (log ms) by op kind: seed %d, %d nodes", h.Seed, h.Nodes)
	c.text(left, 16, title, black)
	x := left
	for _, k := range kindOrder {
		c.fill(image.Rect(x, 26, x+9, 35), colorOf(k))
		c.text(x+12, 35, k, black)
		x += 12 + textWidth(k) + 14
	}
	c.cross(x+3, 31, black)
	c.text(x+10, 35, "failed", black)
	x += 10 + textWidth("failed") + 14
	c.vline(x+3, 26, 36, black)
	c.text(x+8, 35, "indeterminate (top band)", black)
	return png.Encode(w, img)
}

func latencyMS(o history.Op) float64 {
	d := o.Complete - o.Invoke
	if d < 0 {
		d = 0
	}
	return float64(d) / float64(time.Millisecond)
}

func msLabel(decade float64) string {
	v := math.Pow(10, decade)
	if v >= 1 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%g", v)
}

// tickStep picks about ten ticks for the time axis.
func tickStep(end time.Duration) time.Duration {
	for _, s := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond,
		time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second,
		time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute} {
		if end/s <= 12 {
			return s
		}
	}
	return end / 10
}
