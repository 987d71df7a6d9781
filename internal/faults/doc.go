// Package faults holds redlimit's fault and scale tests, run against real
// redis-server processes: exactness across separate OS processes, Redis
// memory and key expiry under very many clients, and script/config changes
// between requests. It has no library code; see faults_test.go.
package faults
