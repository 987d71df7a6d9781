// Package browser holds the admin page's test in a real headless browser
// (Debian's chromium, driven with chromedp). It is a module of its own so
// that the main module does not require a browser driver.
package browser
