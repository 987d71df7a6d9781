package contract

// Traits is what a built-in store, layer or client tells the code that
// wraps it about itself, so that it adds only what is missing: a guard
// goroutine around a call that might not return by its deadline, a deny
// cache in front of a store that does I/O. A type carries Traits by
// embedding a [Carrier].
type Traits struct {
	// HonoursDeadline: a call returns by its context's deadline whatever
	// its store does, so its caller needs no guard goroutine to bound it
	// (redisstore on a client that honours deadlines, rueidisclient, a
	// deny cache in front of such a store).
	HonoursDeadline bool

	// InProcess: every call is decided in process, without I/O, so it
	// cannot block and there is nothing a deny cache would save
	// (memstore).
	InProcess bool

	// CachesDenials: calls of denied keys are answered in process, so a
	// second deny cache in front would add nothing (denycache).
	CachesDenials bool
}

// Carrier carries Traits for the type that embeds it, under an
// unexported name so that nothing of it shows in that type's API (its
// field and its method are unexported):
//
//	type carrier = contract.Carrier
//
//	type Store struct {
//		carrier // set by New: contract.Carry(contract.Traits{...})
//		...
//	}
//
// Only types of this module (and types that embed them) carry Traits: a
// Backend of a user reports the zero Traits and gets every guard, which
// is always safe.
type Carrier struct{ t Traits }

// Carry returns a Carrier of t.
func Carry(t Traits) Carrier { return Carrier{t} }

// traits returns the Traits c carries; embedding c promotes it.
func (c Carrier) traits() Traits { return c.t }

// carrying is implemented by Carrier and every type that embeds it.
type carrying interface{ traits() Traits }

// TraitsOf returns the Traits v carries: those a built-in store, layer or
// client set, the zero Traits for anything else.
func TraitsOf(v any) Traits {
	if c, ok := v.(carrying); ok {
		return c.traits()
	}
	return Traits{}
}
