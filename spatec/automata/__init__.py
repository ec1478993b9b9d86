"""automata"""
