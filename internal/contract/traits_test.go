package contract_test

import (
	"context"
	"testing"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/contract"
)

type carrier = contract.Carrier

// carrying embeds a Carrier under an unexported name, as the stores do.
type carrying struct {
	carrier
	contract.AllowAll
}

// bare is a Backend of a user: it carries no Traits.
type bare struct{}

func (bare) Allow(context.Context, []algorithms.Check, []algorithms.Result) error { return nil }

// TestTraitsOf: a type embedding a Carrier reports its Traits, by value or pointer,
// and through a further embedding; anything else reports none.
func TestTraitsOf(t *testing.T) {
	want := contract.Traits{HonoursDeadline: true, CachesDenials: true}
	c := &carrying{carrier: contract.Carry(want)}
	type wrapper struct{ *carrying }
	cases := []struct {
		name string
		v    any
		want contract.Traits
	}{
		{"pointer", c, want},
		{"value", *c, want},
		{"embedded in a wrapper", wrapper{c}, want},
		{"a user's backend", bare{}, contract.Traits{}},
		{"nil", nil, contract.Traits{}},
	}
	for _, tc := range cases {
		if got := contract.TraitsOf(tc.v); got != tc.want {
			t.Errorf("%s: TraitsOf = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
