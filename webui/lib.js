// The UI's one import point for Preact (+ hooks) and htm, vendored from htm 3.1.1's
// preact/standalone build; pages import from here, never from vendor/ directly.
export {
  html, render, h, Component, createContext, useState, useReducer, useEffect, useLayoutEffect,
  useRef, useMemo, useCallback, useContext,
} from './vendor/preact-htm.js';
