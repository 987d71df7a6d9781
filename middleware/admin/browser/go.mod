module github.com/redlimit/redlimit/middleware/admin/browser

go 1.26.0

replace github.com/redlimit/redlimit => ../../..

require (
	github.com/chromedp/cdproto v0.160.1
	github.com/chromedp/chromedp v0.24.0
	github.com/redlimit/redlimit v0.0.0-00010101000000-000000000000
)

require github.com/go-json-experiment/json v0.0.0-20260213210345-44df1a37e875 // indirect
