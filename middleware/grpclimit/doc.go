package grpclimit
