package world

import (
	"context"
	"errors"
	"math/rand/v2"
)

var errTodo = errors.New("world: not implemented yet")

func (w *world) injectMigrate(context.Context, *rand.Rand, *Event) (healFunc, error) {
	return nil, errTodo
}
func (w *world) injectClock(context.Context, bool, *rand.Rand, *Event) (healFunc, error) {
	return nil, errTodo
}
