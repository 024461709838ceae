/**
 * What vendors deliver for clients to fetch or show (images, finished videos), checked whichever
 * vendor made it: an attack run had `javascript:`, `file:` and loopback links, objects where URLs go,
 * bytes that were no base64 and 200,000 images for n = 1 relayed as successes.
 */
import { describe, expect, it } from "vitest"
import { detailsProblem, finishedVideo, imagesProblem, linkProblem, MAX_OUTPUT_LINKS, outputDetails } from "../../src/Providers/Delivered.ts"

describe("links", () => {
  it("are http(s) URLs; data:image/ URLs only for images", () => {
    expect(linkProblem("https://cdn.example.com/v.mp4?sig=abc", "its video URL")).toBeUndefined()
    expect(linkProblem("http://127.0.0.1:8080/v.mp4", "its video URL")).toBeUndefined()
    expect(linkProblem("javascript:alert(1)", "its video URL")).toBe("its video URL is a javascript: URL, not an http(s) one")
    expect(linkProblem("file:///etc/passwd", "x")).toBe("x is a file: URL, not an http(s) one")
    expect(linkProblem({ href: "https://a" }, "x")).toBe("x is not a URL")
    expect(linkProblem("not a url", "x")).toBe("x is not a URL")
    expect(linkProblem(`https://a/${"p".repeat(20_000)}`, "x")).toBe("x is a URL of 20010 characters")
    expect(linkProblem("data:image/png;base64,AAAA", "x", true)).toBeUndefined()
    expect(linkProblem("data:image/png;base64,AAAA", "x")).toBe("x is a data: URL, not an http(s) one")
  })
})

describe("a finished video's details", () => {
  it("are short texts or numbers; those named like URLs are links", () => {
    expect(detailsProblem({ generationId: "g-1", model: "ray-2", duration: 5, thumbnailUrl: "https://a/t.jpg" })).toBeUndefined()
    expect(detailsProblem({ generationId: { nested: ["x"] } })).toBe("its generationId is not a short text or a number")
    expect(detailsProblem({ predictionId: "x".repeat(20_000_000) })).toBe("its predictionId is not a short text or a number")
    expect(detailsProblem({ thumbnailUrl: "javascript:x" })).toBe("its thumbnailUrl is a javascript: URL, not an http(s) one")
    expect(detailsProblem({ n: Number.NaN })).toBe("its n is not a short text or a number")
  })

  // An attack run: a model's list of output URLs, or a detail the vendor left out, failed a video that was made and billed.
  it("leave out what the vendor did not send; a list is at most 16 links, each an http(s) one", () => {
    expect(finishedVideo("https://a/v.mp4", { predictionId: "p", model: undefined, videoId: null, durationSeconds: 0, taskId: "" })).toStrictEqual({
      details: { predictionId: "p", durationSeconds: 0, taskId: "" }
    })
    expect(finishedVideo("javascript:x", { predictionId: "p" })).toStrictEqual({ problem: "its video URL is a javascript: URL, not an http(s) one" })
    const links = Array.from({ length: 16 }, (_, i) => `https://a/v${i}.mp4`)
    expect(detailsProblem({ outputs: links, outputsOmitted: 4 })).toBeUndefined()
    expect(detailsProblem({ outputs: [...links, "https://a/x.mp4"] })).toBe("its outputs lists 17 links (at most 16)")
    expect(detailsProblem({ outputs: ["https://a/v.mp4", "javascript:alert(1)"] })).toBe("its outputs[1] is a javascript: URL, not an http(s) one")
    expect(detailsProblem({ outputs: ["https://a/v.mp4", { href: "https://a" }] })).toBe("its outputs[1] is not a URL")
    expect(detailsProblem({ outputs: [`https://a/${"p".repeat(20_000)}`] })).toBe("its outputs[0] is a URL of 20010 characters")
  })

  it("list a vendor's several outputs up to 16, counting the rest; one or none is no list", () => {
    expect(outputDetails("https://a/v.mp4")).toEqual({})
    expect(outputDetails(["https://a/v.mp4"])).toEqual({})
    expect(outputDetails(["https://a/1", 7, "", "https://a/2"])).toEqual({ outputs: ["https://a/1", "https://a/2"] })
    const many = outputDetails(Array.from({ length: 100_000 }, (_, i) => `https://a/${i}`))
    expect([(many.outputs as Array<string>).length, (many.outputs as Array<string>)[15], many.outputsOmitted]).toEqual([MAX_OUTPUT_LINKS, "https://a/15", 99_984])
    expect(detailsProblem(many)).toBeUndefined()
  })
})

describe("generated images", () => {
  it("are at least one, at most n, each a link or base64 bytes", () => {
    expect(imagesProblem([{ url: "https://a/i.png" }, { b64Json: "iVBORw0KGgo=" }], 2)).toBeUndefined()
    expect(imagesProblem([], 1)).toBe("no image in the answer")
    expect(imagesProblem(Array.from({ length: 200_000 }, () => ({ url: "https://a/i.png" })), 1)).toBe("200000 images where 1 was asked for")
    expect(imagesProblem([{}], 1)).toBe("image 0 has neither a URL nor base64 bytes")
    expect(imagesProblem([{ url: "file:///etc/passwd" }], 1)).toBe("image 0's url is a file: URL, not an http(s) one")
    expect(imagesProblem([{ b64Json: "<svg onload=alert(1)>" }], 1)).toBe("image 0's bytes are not base64")
    expect(imagesProblem([{ url: "data:image/png;base64,AAAA" }], 1)).toBeUndefined()
    expect(imagesProblem([{ b64Json: "AAAA\nBBBB\r\nCC==" }], 1)).toBeUndefined()
    expect(imagesProblem([{ b64Json: "" }], 1)).toBe("image 0's bytes are not base64")
    // Line breaks then a stray character: the first check backtracked quadratically (60,000 breaks held the loop 2.2 s).
    const started = performance.now()
    expect(imagesProblem([{ b64Json: `A${"\n".repeat(2_000_000)}!` }], 1)).toBe("image 0's bytes are not base64")
    expect(performance.now() - started).toBeLessThan(5_000)
  })
})
