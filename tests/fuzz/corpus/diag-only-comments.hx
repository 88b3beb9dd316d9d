# nothing here
// nor here
