package calc

import "testing"

// TestRefundRecordRuns: refunds of neighbouring commits (V one cost
// apart) merge into runs once the record holds more than RefundKeep, and
// an outstanding commit between two runs keeps them apart: its refund
// still counts every later refund as later, and every earlier one as
// earlier.
func TestRefundRecordRuns(t *testing.T) {
	const cost = 100
	var rec RefundRecord
	// 80 commits at V = 100, 200, ..., 8000 (frozen clock, at 0, no
	// refund before them), all refunded but the 40th (V 4000), in
	// the order 41..80 then 1..39
	order := []int{}
	for i := 41; i <= 80; i++ {
		order = append(order, i)
	}
	for i := 1; i <= 39; i++ {
		order = append(order, i)
	}
	for _, i := range order {
		_, v := rec.Since(RefundMark{}, 0, int64(i)*cost)
		rec.Add(v, v, cost, 0)
	}
	if len(rec.Kept) > RefundKeep {
		t.Fatalf("%d runs kept, want at most %d", len(rec.Kept), RefundKeep)
	}
	// the 40th: 40 refunds of later commits, 39 of earlier ones
	if since, _ := rec.Since(RefundMark{}, 0, 40*cost); since != 39*cost {
		t.Errorf("since = %d, want %d (the 39 earlier refunds): runs %+v", since, 39*cost, rec.Kept)
	}
	if rec.R != 79*cost {
		t.Errorf("R = %d, want %d", rec.R, 79*cost)
	}
}
