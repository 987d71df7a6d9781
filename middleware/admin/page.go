package admin

import (
	_ "embed"
	"html/template"
	"strconv"
	"time"
)

//go:embed page.html
var pageHTML string

var pageTemplate = template.Must(template.New("page").Funcs(template.FuncMap{
	"since": func(now, t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return now.Sub(t).Round(time.Second).String() + " ago"
	},
	"clock": func(t time.Time) string { return t.UTC().Format("15:04:05 UTC") },
	"span": func(s float64) string {
		return (time.Duration(s * float64(time.Second))).Round(time.Second).String()
	},
	"num": func(v uint64) string { return strconv.FormatUint(v, 10) },
	"pct": func(part, total uint64) string {
		if total == 0 {
			return ""
		}
		return strconv.FormatFloat(100*float64(part)/float64(total), 'f', 1, 64) + "%"
	},
	"denied": func(c counts) uint64 { return c["denied"] + c["denied_local"] },
	"decided": func(c counts) uint64 {
		return c["allowed"] + c["denied"] + c["denied_local"] + c["shadow_denied"] + c["errors"] + c["missing_key"]
	},
}).Parse(pageHTML))
