package main

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"strings"
	"time"

	"github.com/redlimit/redlimit/algorithms"
)

// Geometry of the picture, in pixels.
const (
	width      = 1000
	plotLeft   = 50  // x of t = 0
	plotRight  = 970 // x of t = span
	lanesTop   = 112 // y of the first lane's label
	laneHeight = 130
	pitch      = 8   // vertical distance between stacked marks
	radius     = 3.5 // of a mark
	column     = 50 * time.Millisecond
	allowColor = "#009E73" // Okabe-Ito bluish green
	denyColor  = "#D55E00" // Okabe-Ito vermillion
)

// notes says, for each lane, what to see in it.
func notes(l algorithms.Limit) map[algorithms.Algorithm]string {
	return map[algorithms.Algorithm]string{
		algorithms.FixedWindow:   "a full window on each side of the boundary: up to 2× the limit within " + human(l.Period),
		algorithms.SlidingLog:    "exact: at most " + fmt.Sprint(l.Rate) + " in any " + human(l.Period),
		algorithms.SlidingWindow: "weights the previous window's count: damps the boundary burst, approximately",
		algorithms.TokenBucket:   fmt.Sprintf("a full bucket (%d) at once, then the refill rate (%d per %s)", l.Capacity(algorithms.TokenBucket), l.Rate, human(l.Period)),
		algorithms.GCRA:          "identical to token_bucket: the same bucket, stored as one value (the theoretical arrival time)",
		algorithms.Concurrency:   "slots in flight, none released here: each request holds its slot for its lease (" + human(l.Period) + "), so it reads as sliding_log",
	}
}

// render returns the SVG document: a title and legend, one lane per
// algorithm, a time axis and a caption.
func render(l algorithms.Limit, reqs []time.Duration, lanes []lane) []byte {
	var b bytes.Buffer
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }

	lanesBottom := lanesTop + len(lanes)*laneHeight
	height := lanesBottom + 100
	p(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	p(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="13">`+"\n", width, height, width, height)
	p(`<rect width="100%%" height="100%%" fill="white"/>` + "\n")

	// Title, traffic, legend.
	text(&b, plotLeft, 30, `font-size="20" font-weight="bold"`, fmt.Sprintf("The algorithms, the same traffic, a limit of %d requests per %s", l.Rate, human(l.Period)))
	text(&b, plotLeft, 54, `fill="#333"`, fmt.Sprintf("Traffic: one request every %s (%d per second, under the limit), plus %d requests in the %s before t = %s and %d in the %s after.",
		human(steadyEvery), int(time.Second/steadyEvery), burstHalf, human(burstHalf*burstSpacing), human(boundary), burstHalf, human(burstHalf*burstSpacing)))
	legendY := 80.0
	circle(&b, plotLeft+4, legendY-4, "")
	text(&b, plotLeft+14, legendY, "", "allowed")
	cross(&b, plotLeft+84, legendY-4, "")
	text(&b, plotLeft+94, legendY, "", "denied")
	p(`<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#888" stroke-dasharray="4 3"/>`+"\n", plotLeft+160, legendY-12, plotLeft+160, legendY+2)
	text(&b, plotLeft+168, legendY, "", "window boundary (every "+human(l.Period)+")")
	text(&b, plotRight, legendY, `text-anchor="end" fill="#333"`, "requests in the same "+human(column)+" are stacked, earliest at the bottom")

	// Lane backgrounds with the window boundaries, then the lanes.
	for i := range lanes {
		top, bottom := band(lanesTop + i*laneHeight)
		p(`<rect x="%d" y="%.1f" width="%d" height="%.1f" fill="#f2f2f2"/>`+"\n", plotLeft, top, plotRight-plotLeft, bottom-top)
		for t := time.Duration(0); t <= span; t += l.Period {
			p(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#888" stroke-dasharray="4 3"/>`+"\n", xOf(t), top, xOf(t), bottom)
		}
	}

	laneNotes := notes(l)
	for i, ln := range lanes {
		drawLane(&b, ln, l, laneNotes[ln.alg], lanesTop+i*laneHeight)
	}

	// Time axis: a tick and a label every 0.5 s.
	axisY := float64(lanesBottom) + 4
	p(`<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="black"/>`+"\n", plotLeft, axisY, plotRight, axisY)
	for t := time.Duration(0); t <= span; t += 500 * time.Millisecond {
		p(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", xOf(t), axisY, xOf(t), axisY+6)
		text(&b, xOf(t), axisY+20, `text-anchor="middle"`, fmt.Sprint(t.Seconds()))
	}
	text(&b, (plotLeft+plotRight)/2, axisY+40, `text-anchor="middle"`, "time since start (s); start is Unix time "+fmt.Sprint(start.Unix())+", a whole second, so windows begin at every whole second")

	// Caption.
	text(&b, plotLeft, axisY+68, `fill="#333"`, "token_bucket and gcra allow exactly the same requests: GCRA is a token bucket that stores one value (the theoretical")
	text(&b, plotLeft, axisY+86, `fill="#333"`, "arrival time) instead of two (tokens, last refill). Every lane is one key on redlimit's in-memory backend, with an injected clock.")
	p("</svg>\n")
	return b.Bytes()
}

// drawLane draws one algorithm's label and marks, top being the y of the label.
func drawLane(b *bytes.Buffer, ln lane, l algorithms.Limit, note string, top int) {
	s := ln.stats(l.Period)
	_, bandBottom := band(top)
	fmt.Fprintf(b, `<text x="%d" y="%d"><tspan font-weight="bold">%s</tspan><tspan dx="8">allowed %d / denied %d · max allowed in any %s: %d</tspan></text>`+"\n",
		plotLeft, top, esc(ln.alg.String()), s.allowed, s.denied, esc(human(l.Period)), s.maxPerPeriod)
	text(b, plotLeft, float64(top)+16, `font-size="12" fill="#555"`, note)

	// Stack the requests of each 50 ms column, earliest at the bottom, at
	// the column's mean time.
	baseline := bandBottom - 4 - radius
	for i := 0; i < len(ln.at); {
		j := i
		var sum time.Duration
		for j < len(ln.at) && ln.at[j]/column == ln.at[i]/column {
			sum += ln.at[j]
			j++
		}
		x := xOf(sum / time.Duration(j-i))
		for k := i; k < j; k++ {
			y := baseline - float64(k-i)*pitch
			tip := fmt.Sprintf("t = %.3f s: ", ln.at[k].Seconds())
			if ln.allowed[k] {
				circle(b, x, y, tip+"allowed")
			} else {
				cross(b, x, y, tip+"denied")
			}
		}
		i = j
	}
}

// band returns the vertical extent of the background of the lane whose label
// is at top: room for a stack of burstHalf marks, the most that share a
// column.
func band(top int) (y0, y1 float64) {
	y0 = float64(top) + 24
	return y0, y0 + burstHalf*pitch + 8
}

// xOf returns the x coordinate of offset t.
func xOf(t time.Duration) float64 {
	return plotLeft + float64(plotRight-plotLeft)*t.Seconds()/span.Seconds()
}

// human formats d for a reader: "1 s", "125 ms".
func human(d time.Duration) string {
	switch {
	case d%time.Second == 0:
		return fmt.Sprint(int64(d/time.Second), " s")
	case d%time.Millisecond == 0:
		return fmt.Sprint(int64(d/time.Millisecond), " ms")
	}
	return d.String()
}

// text writes a text element; attrs are extra attributes, s is escaped.
func text(b *bytes.Buffer, x, y float64, attrs, s string) {
	if attrs != "" {
		attrs = " " + attrs
	}
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f"%s>%s</text>`+"\n", x, y, attrs, esc(s))
}

// circle writes an allowed mark centred on (x, y), with a tooltip unless tip
// is empty.
func circle(b *bytes.Buffer, x, y float64, tip string) {
	fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="%.1f" fill="%s">%s</circle>`+"\n", x, y, radius, allowColor, tooltip(tip))
}

// cross writes a denied mark, an ×, centred on (x, y).
func cross(b *bytes.Buffer, x, y float64, tip string) {
	const d = radius - 0.5 // so that stacked crosses do not touch
	fmt.Fprintf(b, `<path d="M%.1f %.1fL%.1f %.1fM%.1f %.1fL%.1f %.1f" stroke="%s" stroke-width="2">%s</path>`+"\n",
		x-d, y-d, x+d, y+d, x-d, y+d, x+d, y-d, denyColor, tooltip(tip))
}

func tooltip(tip string) string {
	if tip == "" {
		return ""
	}
	return "<title>" + esc(tip) + "</title>"
}

// esc escapes s for use as XML character data.
func esc(s string) string {
	var sb strings.Builder
	xml.EscapeText(&sb, []byte(s)) // a strings.Builder never fails
	return sb.String()
}
