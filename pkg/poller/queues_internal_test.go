package poller

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestWeightedOrderDrawsEachPlaceByWeight draws 100,000 orders of three queues weighted 5:3:2 and
// checks the shares of the first place (5/10, 3/10, 2/10: what a queue gets while every queue has
// messages) and of one second place (after the first queue, the second is drawn among the rest by
// weight: 3/5 and 2/5), within half a percentage point.
func TestWeightedOrderDrawsEachPlaceByWeight(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	p := &Poller{cfg: Config{Priority: Weighted, Rand: r.Float64}, multi: &multi{}}
	for _, w := range []int{5, 3, 2} {
		p.multi.lanes = append(p.multi.lanes, &lane{weight: w})
	}
	const n = 100_000
	first := map[*lane]int{}
	secondAfter0 := map[*lane]int{}
	for range n {
		o := p.order()
		if len(o) != 3 || o[0] == o[1] || o[1] == o[2] || o[0] == o[2] {
			t.Fatalf("order %v is not a permutation of the three queues", o)
		}
		first[o[0]]++
		if o[0] == p.multi.lanes[0] {
			secondAfter0[o[1]]++
		}
	}
	lanes := p.multi.lanes
	for i, want := range []float64{0.5, 0.3, 0.2} {
		if got := float64(first[lanes[i]]) / n; math.Abs(got-want) > 0.005 {
			t.Errorf("queue %d (weight %d) came first in %.4f of the orders, want %.2f", i, lanes[i].weight, got, want)
		}
	}
	total := float64(first[lanes[0]])
	for i, want := range map[int]float64{1: 0.6, 2: 0.4} {
		if got := float64(secondAfter0[lanes[i]]) / total; math.Abs(got-want) > 0.01 {
			t.Errorf("after queue 0, queue %d came second in %.4f of the orders, want %.2f", i, got, want)
		}
	}
	p.cfg.Priority = Strict
	if o := p.order(); o[0] != lanes[0] || o[1] != lanes[1] || o[2] != lanes[2] {
		t.Error("Strict's order is not Config.Queues' order")
	}
}
