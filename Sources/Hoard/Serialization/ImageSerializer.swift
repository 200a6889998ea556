import Foundation

#if canImport(UIKit)
import UIKit
#elseif canImport(AppKit)
import AppKit
#endif

#if canImport(UIKit)
/// Stores `UIImage`s as PNG or JPEG: the serializer of an image cache on iOS, tvOS, visionOS,
/// watchOS and Mac Catalyst.
///
/// ```swift
/// let avatars = try CacheBuilder<UIImage>(serializer: ImageSerializer())
///     .containerName("avatars")
///     .fetcher { url in try await loadImage(url) }
///     .build()
/// ```
/// Decoding keeps the image's scale at 1; set `scale` to the screen's for point-sized drawing.
public struct ImageSerializer: CacheSerializer {
    /// The format of the stored bytes.
    public var format: Format
    /// The scale of decoded images.
    public var scale: Double

    /// Creates a serializer.
    ///
    /// - Parameters:
    ///   - format: PNG (the default) or JPEG with a quality.
    ///   - scale: The scale of decoded images (default 1).
    public init(format: Format = .png, scale: Double = 1) {
        self.format = format
        self.scale = scale
    }

    /// Encodes the image in ``format``.
    ///
    /// - Throws: ``ImageSerializer/Failure`` when the image has no bitmap to encode.
    public func serialize(_ image: UIImage) throws -> Data {
        let data: Data? =
            switch format.kind {
            case .png: image.pngData()
            case .jpeg(let quality): image.jpegData(compressionQuality: CGFloat(quality))
            }
        guard let data else { throw Failure.cannotEncode }
        return data
    }

    /// Decodes an image.
    ///
    /// - Throws: ``ImageSerializer/Failure`` when the bytes are not an image.
    public func deserialize(_ data: Data) throws -> UIImage {
        guard let image = UIImage(data: data, scale: CGFloat(scale)) else { throw Failure.cannotDecode }
        return image
    }
}
#elseif canImport(AppKit)
/// Stores `NSImage`s as PNG or JPEG: the serializer of an image cache on macOS.
///
/// `NSImage` is not `Sendable`, and a ``Cache`` holds `Sendable` values: use it with images that are
/// never changed once made, through a `Sendable` wrapper of your own, or with `CGImage`-backed
/// images you only read.
public struct ImageSerializer: CacheSerializer {
    /// The format of the stored bytes.
    public var format: Format

    /// Creates a serializer.
    ///
    /// - Parameter format: PNG (the default) or JPEG with a quality.
    public init(format: Format = .png) {
        self.format = format
    }

    /// Encodes the image in ``format``.
    ///
    /// - Throws: ``ImageSerializer/Failure`` when the image has no bitmap to encode.
    public func serialize(_ image: NSImage) throws -> Data {
        guard let tiff = image.tiffRepresentation, let bitmap = NSBitmapImageRep(data: tiff) else {
            throw Failure.cannotEncode
        }
        let data: Data? =
            switch format.kind {
            case .png: bitmap.representation(using: .png, properties: [:])
            case .jpeg(let quality): bitmap.representation(using: .jpeg, properties: [.compressionFactor: quality])
            }
        guard let data else { throw Failure.cannotEncode }
        return data
    }

    /// Decodes an image.
    ///
    /// - Throws: ``ImageSerializer/Failure`` when the bytes are not an image.
    public func deserialize(_ data: Data) throws -> NSImage {
        guard let image = NSImage(data: data) else { throw Failure.cannotDecode }
        return image
    }
}
#endif

#if canImport(UIKit) || canImport(AppKit)
extension ImageSerializer {
    /// How the serializer stores an image.
    ///
    /// A struct with static members rather than an enum, so that a minor release can add a format.
    public struct Format: Sendable, Hashable {
        enum Kind: Sendable, Hashable {
            case png
            case jpeg(quality: Double)
        }

        let kind: Kind

        /// PNG: lossless, keeps transparency.
        public static var png: Format { Format(kind: .png) }

        /// JPEG at a compression quality from 0 (smallest) to 1 (best); no transparency.
        public static func jpeg(quality: Double) -> Format { Format(kind: .jpeg(quality: quality)) }
    }

    /// Why the serializer could not store or read an image.
    ///
    /// Complete: an image is either encoded or decoded, so this enum never grows.
    public enum Failure: Error, Sendable, Hashable {
        /// The image has no bitmap that can be encoded in the chosen format.
        case cannotEncode
        /// The stored bytes are not an image.
        case cannotDecode
    }
}
#endif
