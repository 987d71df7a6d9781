package admin

import (
	_ "embed"
	"html/template"
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
}).Parse(pageHTML))
