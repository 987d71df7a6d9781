//go:build !race

package chaos

// raceEnabled reports a test binary built with the race detector.
const raceEnabled = false
