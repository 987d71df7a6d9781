package lua

// The one-check script of a calendar quota, [Single]("calendar"): now.lua,
// the prelude, calendar.lua, the guard of calendar_one.lua (a now outside
// the windows sent is not decided), then one.lua. Calendar calls are never
// batched: the batch scripts do not hold calendar.lua.
func init() {
	single["calendar"] = source("now") + source("prelude") + source("calendar") + source("calendar_one") +
		checkLine("calendar") + source("one")
}
